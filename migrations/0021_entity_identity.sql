-- Entity identity and name folding (issue 11, review of the resolution).

-- Homonyms: PERSON "Jordan" and GPE "Jordan" are two entities. An entity is identified by its
-- namespace, normalised name and label class: the label when an extractor typed the name (spaCy's
-- PERSON, ORG, GPE..., an HTTP extractor's labels), '' for the heuristic extractor's shape labels
-- (NAME, ACRONYM, IDENTIFIER, QUANTITY, QUOTED: how a name is written, not what it names; the
-- same list as pipeline/entities/likeness.py SHAPE_LABELS). Generated, so every writer agrees;
-- existing entities keep their ids (pipeline/entities/ids.py derives '' class ids as before).
ALTER TABLE entities ADD COLUMN label_class text NOT NULL GENERATED ALWAYS AS (
    CASE WHEN label IN ('NAME', 'ACRONYM', 'IDENTIFIER', 'QUANTITY', 'QUOTED') THEN ''
         ELSE label END) STORED;

DROP INDEX entities_ns_norm;
CREATE UNIQUE INDEX entities_ns_norm_class ON entities (namespace_id, norm, label_class)
    WHERE merged_into IS NULL;

-- The fold of pipeline/entities/names.py, in SQL, on a normalised name: NFKD, the Combining
-- Diacritical Marks removed, the Latin letters that do not decompose spelled in ASCII (the same
-- table as names.py LATIN_FROM / LATIN_TO / LATIN_MULTI), and every run of anything but a letter
-- of any script (with its marks) or an ASCII digit one space. 0015's version went through
-- unaccent and kept only [0-9a-z]: non-Latin names folded to nothing and "ł", "ø", "æ" were
-- dropped by the Python side. No unaccent any more: its rules vary with the server's version,
-- this table does not. pg_c_utf8 gives the regex Unicode character classes (letters of every
-- script) whatever the database's own collation. tests/resolution/test_fold_sql.py compares the
-- two on the real server.
CREATE OR REPLACE FUNCTION brainstream_name_fold(name text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
RETURN btrim(regexp_replace(
    normalize(replace(replace(replace(replace(replace(replace(replace(
        translate(regexp_replace(normalize(name, NFKD), '[\u0300-\u036f]+', '', 'g'),
                  'ðøđħıĸłŋŧƀƃƈƌƒƙƚƞƥƫƭƴƶǥȡȥȴȵȶȷȼȿɀɇɉɍɏ',
                  'dodhiqlntbbcdfklnpttyzgdzlntjcszejry'),
        'æ', 'ae'), 'þ', 'th'), 'œ', 'oe'), 'ƕ', 'hv'), 'ƣ', 'oi'), 'ȸ', 'db'), 'ȹ', 'qp'),
        NFC) COLLATE "pg_c_utf8",
    '[^[:alpha:]0-9]+', ' ', 'g'));

-- The index holds folds of the old function: rebuild it with the new one.
REINDEX INDEX entities_ns_fold;
