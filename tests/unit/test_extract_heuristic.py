"""The heuristic extractor's rules, one by one, and its invariants on arbitrary text."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pipeline.domain.errors import ConfigError
from pipeline.domain.mentions import Mention, TextField
from pipeline.entities.extractors import HeuristicExtractor, build_extractor
from pipeline.entities.extractors.spans import longest_first, occurrences
from pipeline.ports import Extractor
from pipeline.settings import Settings

EXTRACTOR = HeuristicExtractor()


def found(text: str, field: str = "content") -> list[Mention]:
    mentions = EXTRACTOR.extract_row([TextField(field, text)])
    for m in mentions:
        assert text[m.start:m.end] == m.text
    return mentions


def spans(text: str) -> list[tuple[str, str]]:
    return [(m.label, m.text) for m in found(text)]


# -- capitalised names ---------------------------------------------------------------------


def test_connectors_join_capitalised_words() -> None:
    assert spans("He worked at the Bank of England for years.") == [("NAME", "Bank of England")]
    assert spans("a statue of Charles de Gaulle stood") == [("NAME", "Charles de Gaulle")]
    assert spans("music by Ludwig van Beethoven today") == [("NAME", "Ludwig van Beethoven")]


def test_and_joins_only_after_of_or_for() -> None:
    assert spans("talks between France and Germany ended") == [
        ("NAME", "France"), ("NAME", "Germany")]
    assert spans("the Department of Health and Human Services said") == [
        ("NAME", "Department of Health and Human Services")]


def test_sentence_start_function_words_are_not_names() -> None:
    assert spans("The cat sat. However, it rained. This is fine.") == []
    # Trimmed from the edge of a name, not the name itself.
    assert spans("The Bank of England raised rates.") == [("NAME", "Bank of England")]


def test_chat_interjections_and_contractions_are_not_names() -> None:
    # a chat turn is short: the lower-case rule has no other use of the word to go by
    assert spans("Sure! I can help with that.") == []
    assert spans("Wow, that sounds great Caroline!") == [("NAME", "Caroline")]
    assert spans("Hey Melanie, how are you?") == [("NAME", "Melanie")]
    assert spans("I'm going to Paris. I\u2019ve seen Rome.") == [
        ("NAME", "Paris"), ("NAME", "Rome")]


def test_lone_sentence_start_word_used_in_lower_case_is_not_a_name() -> None:
    assert spans("Aspirin lowers risk. We gave aspirin daily.") == []
    assert spans("Paris is large. We love it.") == [("NAME", "Paris")]
    # Mid-sentence the same capitalised word is a name.
    assert spans("we met in Paris and saw paris hilton") == [("NAME", "Paris")]


def test_long_fields_apply_the_sentence_start_rule_alike() -> None:
    # Past 4,000 characters the lower-case check reads a word set built once per field.
    words = [f"zq{chr(97 + i % 26)}{chr(97 + i // 26)}word" for i in range(600)]
    text = " ".join(f"{w.capitalize()} is here." for w in words)
    wide = HeuristicExtractor(max_mentions=1000)
    def count(t: str) -> int:
        return len(wide.extract_row([TextField("content", t)]))
    assert len(text) > 4000 and count(text) == 600
    assert count(text + " but " + " ".join(words[:10])) == 590


def test_sentence_opening_adverb_before_a_comma_is_not_a_name() -> None:
    assert spans("Initially, we left. Italy, a country. Interestingly, no. Kimberly, hi.") == [
        ("NAME", "Italy"), ("NAME", "Kimberly")]


def test_sentence_start_after_colon_newline_and_quote() -> None:
    assert spans("Results: we found nothing") == []
    assert spans("line one\nThese are results") == []
    assert spans("(However, no)") == []
    assert spans('"However, no."') == []  # nor a quoted term: only function words


def test_abbreviation_periods_do_not_end_names_or_sentences() -> None:
    assert spans("a speech by Dr. John F. Kennedy in St. Louis") == [
        ("NAME", "John F. Kennedy"), ("NAME", "St. Louis")]


def test_capitalised_stop_word_inside_a_run_splits_it() -> None:
    assert spans("IMPORTANCE The 2008 Physical Activity Guidelines for Americans") == [
        ("NAME", "Physical Activity Guidelines for Americans")]


def test_numbers_after_a_capitalised_word_are_part_of_the_name() -> None:
    assert spans("the Apollo 11 crew and Python 3.11 users") == [
        ("NAME", "Apollo 11"), ("NAME", "Python 3.11")]
    assert spans("under Amendment 16 of the act") == [("NAME", "Amendment 16")]


def test_names_stop_at_punctuation_and_possessives() -> None:
    assert spans("in Paris, London and Rome") == [
        ("NAME", "Paris"), ("NAME", "London"), ("NAME", "Rome")]
    assert spans("the Bank of England's rate") == [("NAME", "Bank of England")]
    assert spans("an Alzheimer-related decline") == [("NAME", "Alzheimer")]


def test_names_are_at_most_eight_tokens() -> None:
    text = "we saw " + " ".join(f"Alpha{chr(97 + i)}x" for i in range(10)).replace("x", "")
    names = [m for m in found(text) if m.label == "NAME"]
    assert names and all(len(m.text.split()) <= 8 for m in names)


def test_unicode_names() -> None:
    assert spans("we visited Øresund with Émile Zola and Ελλάδα") == [
        ("NAME", "Øresund"), ("NAME", "Émile Zola"), ("NAME", "Ελλάδα")]
    assert spans("the Müller-Lyer illusion") == [("NAME", "Müller-Lyer")]


# -- acronyms ------------------------------------------------------------------------------


def test_acronyms() -> None:
    assert spans("funded by NASA and the U.S. army against HIV-1 and COVID-19") == [
        ("ACRONYM", "NASA"), ("ACRONYM", "U.S."), ("ACRONYM", "HIV-1"),
        ("ACRONYM", "COVID-19")]
    assert spans("levels of mRNA and IL-6 in CEOs") == [
        ("ACRONYM", "mRNA"), ("ACRONYM", "IL-6"), ("ACRONYM", "CEOs")]


def test_dotted_acronym_has_its_plain_alias() -> None:
    (m,) = found("made in the U.K. today")
    assert (m.text, m.aliases) == ("U.K.", ("UK",))


def test_lone_roman_numerals_and_single_capitals_are_not_names() -> None:
    assert spans("see part II where I said A is true") == []
    assert spans("after World War II ended") == [("NAME", "World War II")]
    assert spans("the league (CMLL) and MIX") == [("ACRONYM", "CMLL")]


def test_us_and_it_in_capitals_are_acronyms_but_the_is_not() -> None:
    assert spans("THE US army and the IT team") == [("ACRONYM", "US"), ("ACRONYM", "IT")]


# -- numbers with units --------------------------------------------------------------------


def test_quantities() -> None:
    assert spans("take 5 mg twice, at 3.2 GHz, 10% off, 37 °C and 5 mg/kg") == [
        ("QUANTITY", "5 mg"), ("QUANTITY", "3.2 GHz"), ("QUANTITY", "10%"),
        ("QUANTITY", "37 °C"), ("QUANTITY", "5 mg/kg")]
    assert spans("it cost $1.5 billion over 6 months") == [
        ("QUANTITY", "$1.5 billion"), ("QUANTITY", "6 months")]


def test_bare_numbers_and_unit_lookalikes_are_not_quantities() -> None:
    assert spans("in 2019 we saw 42 cases in total") == []
    assert spans("5 moles") == []  # "m" is a unit, "moles" is not


# -- identifiers ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "alias"), [
    ("parseHttpRequest", "parse http request"),
    ("parse_http_request", "parse http request"),
    ("HTTPServer", "http server"),
    ("pkg.mod.Class", "pkg mod class"),
    ("src/api/app.py", "src api app py"),
    ("std::vec::Vec", "std vec vec"),
    ("https://example.org/a/b", "https example org a b"),
])
def test_identifiers_kept_whole_with_segments_as_alias(text: str, alias: str) -> None:
    (m,) = found(f"call {text} now")
    assert (m.label, m.text, m.name, m.aliases) == ("IDENTIFIER", text, text, (alias,))


def test_identifier_trailing_punctuation_and_lower_suffix_are_cut() -> None:
    assert spans("see parse_http_request().") == [("IDENTIFIER", "parse_http_request")]
    assert spans("in ConA-induced cells") == [("IDENTIFIER", "ConA")]


def test_slashes_between_words_are_not_paths() -> None:
    assert spans("and/or his/her 5 km/h") == [("QUANTITY", "5 km/h")]
    assert spans("over TCP/IP links") == [("ACRONYM", "TCP"), ("ACRONYM", "IP")]


def test_abbreviations_and_decimals_are_not_identifiers() -> None:
    assert spans("many, e.g. cats, i.e. pets, version 1.2.3") == []


# -- quoted terms --------------------------------------------------------------------------


def test_quoted_terms_straight_and_curly() -> None:
    text = ('so-called "deep learning", “big data”, \u2018dark matter\u2019, '
            "'hot take' and «Le Monde»")
    got = [(m.label, m.text, m.name) for m in found(text)]
    assert got == [
        ("QUOTED", '"deep learning"', "deep learning"),
        ("QUOTED", "“big data”", "big data"),
        ("QUOTED", "\u2018dark matter\u2019", "dark matter"),
        ("QUOTED", "'hot take'", "hot take"),
        ("QUOTED", "«Le Monde»", "Le Monde"),
    ]


def test_long_or_empty_quotes_and_apostrophes_are_not_terms() -> None:
    long = '"' + " ".join(["word"] * 9) + '"'
    assert spans(f"he said {long} loudly") == []
    assert spans('an empty "" pair, don\'t and rock \'n\' roll') == []
    assert spans('he said "the" twice') == []


# -- overlaps, fields, cap -----------------------------------------------------------------


def test_longest_span_wins() -> None:
    # The quoted term holds the name; the name holds its own acronym-free words.
    assert spans('the “Bank of England” said') == [("QUOTED", "“Bank of England”")]
    assert spans("the NASA Ames Research Center") == [("NAME", "NASA Ames Research Center")]


def test_fields_are_read_separately_and_in_order() -> None:
    row = [TextField("title", "Bank of England"), TextField("content", "met NASA")]
    got = [(m.field, m.text, m.start) for m in EXTRACTOR.extract_row(row)]
    assert got == [("title", "Bank of England", 0), ("content", "NASA", 4)]


def test_rows_answer_in_order_and_empty_rows_are_empty() -> None:
    out = EXTRACTOR.extract([[TextField("content", "NASA")], [], [TextField("content", "")]])
    assert [len(e.mentions) for e in out] == [1, 0, 0]
    assert all(e.triples == [] for e in out)


def test_max_mentions_per_row_keeps_the_first() -> None:
    text = " ".join(f"v{i}_x" for i in range(50))
    got = HeuristicExtractor(max_mentions=5).extract_row([TextField("content", text)])
    assert [m.text for m in got] == ["v0_x", "v1_x", "v2_x", "v3_x", "v4_x"]


def test_longest_first_prefers_longer_then_earlier() -> None:
    field = TextField("content", "abcdefgh")
    def m(start: int, end: int) -> Mention:
        return Mention("n", "L", "content", start, end, field.text[start:end])
    kept = longest_first([m(0, 2), m(1, 5), m(4, 8), m(6, 8)], [field], 10)
    assert [(k.start, k.end) for k in kept] == [(1, 5), (6, 8)]


def test_occurrences_whole_words_then_any_case() -> None:
    assert occurrences("AI said AI", "AI") == [0, 8]
    assert occurrences("the bank of england", "Bank of England") == [4]
    assert occurrences("said", "AI") == []


# -- the builder ---------------------------------------------------------------------------


def test_build_extractor_default_is_heuristic() -> None:
    extractor = build_extractor(Settings())
    assert extractor.name == "heuristic" and isinstance(extractor, Extractor)


def test_build_http_without_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        build_extractor(Settings(entity_extractor="http"))
    assert err.value.field == "entity_http_url"


# -- invariants ----------------------------------------------------------------------------


# 20,000 strings: 200 examples of 100 each (hypothesis' per-example overhead would otherwise be
# most of the run).
@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.text(max_size=200), min_size=100, max_size=100))
def test_any_unicode_text_gives_exact_non_overlapping_spans(texts: list[str]) -> None:
    for text in texts:
        mentions = found(text)
        for a, b in itertools.pairwise(mentions):
            assert a.end <= b.start
        for m in mentions:
            assert m.start < m.end and m.name.strip()


_WORDS = st.sampled_from(["The", "Bank", "of", "England", "NASA", "U.S.", "5", "mg", "10%",
                          "parse_http", "a.b.c", '"', "“", "”", "'", "and", "Dr.", "F.",
                          "however", ",", ".", "\n", "Ünïcode", "x/y/z", "ConA-induced"])


@settings(max_examples=500, deadline=None)
@given(st.lists(_WORDS, max_size=40))
def test_word_soup_gives_exact_spans(words: list[str]) -> None:
    found(" ".join(words))


@pytest.mark.parametrize(("text", "names"), [
    ("I flew to New York City with Caroline.", ["New York City", "Caroline"]),
    ("New Zealand and North Carolina", ["New Zealand", "North Carolina"]),
    ("The Second World War ended.", ["Second World War"]),
    ("New data show that Early results differ.", []),
])
def test_an_adjective_opens_a_name_before_a_capitalised_word(text: str,
                                                             names: list[str]) -> None:
    found = HeuristicExtractor().extract([[TextField("content", text)]])[0].mentions
    assert [m.name for m in found if m.label == "NAME"] == names
