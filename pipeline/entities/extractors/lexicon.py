"""The word lists of the heuristic extractor: what is never a name, what joins one, what a
number's unit looks like. Compact on purpose: English function words and the openers that
start sentences and abstracts' sections, not a dictionary.
"""

from __future__ import annotations

import re

# Function words, pronouns, common sentence openers and section headings: capitalised, they are
# still not names ("The", "However", "This", "Results"); the interjections and contractions that
# open chat turns ("Sure!", "Wow,", "I'm") likewise. Compared lower-cased.
# A word list reads better as lines of prose width than as 300 quoted strings.
STOP_WORDS = frozenset("""
a about above according across after afterwards again against all almost along already also
although always among an and another any anyhow anyone anything anyway anywhere are around as
at be because been before beforehand behind being below beside besides between beyond both but
by can cannot could did do does doing done down during each either else elsewhere enough even
ever every everyone everything everywhere except few first for former formerly from further
furthermore had has have having he hence her here hereby herein hers herself him himself his how
however i if in indeed instead into is it its itself just last latter least less let like many
may me meanwhile might mine more moreover most mostly much must my myself namely neither never
nevertheless next no nobody none nor not nothing now nowhere of off often on once one only onto
or other others otherwise our ours ourselves out over overall own per perhaps rather same second
several she should since so some somehow someone something sometimes somewhere still such than
that the their theirs them themselves then thence there thereafter thereby therefore therein
thereupon these they third this those though through throughout thus to together too toward
towards under unless until up upon us very via was we well were what whatever when whence
whenever where whereas whereby wherever whether which while who whoever whole whom whose why
will with within without would yet you your yours yourself yourselves
yes ok okay oh please thanks thank dear hello hi today yesterday tomorrow
sure yeah yep yup nope hey wow whoa yay aww oops ah ahh haha hahaha lol omg ugh hmm um uh
congrats congratulations absolutely awesome definitely totally honestly sorry bye goodbye
i'm i've i'd i'll it's that's let's there's what's he's she's we're you're they're we've you've
note notes see also finally firstly secondly thirdly lastly importantly notably similarly
conversely consequently additionally specifically interestingly surprisingly collectively
taken together
abstract background introduction objective objectives aim aims purpose method methods
methodology design setting settings participants patients results result findings conclusion
conclusions discussion summary significance context interpretation limitations funding
measurements main outcome outcomes evidence review table figure fig supplementary
monday tuesday wednesday thursday friday saturday sunday
using used use based given following compared including despite unlike recent recently
previous previously current currently new novel further future present prior early late
zero two three four five six seven eight nine ten twelve hundred thousand million billion
importance rationale aims hypothesis study studies analysis analyses data trial trials
""".split())  # noqa: SIM905
# the same contractions typed with a typographic apostrophe (U+2019)
STOP_WORDS = STOP_WORDS | {w.replace("'", "\u2019") for w in STOP_WORDS if "'" in w}

# Stop words that open a name when a capitalised word follows in the same run ("New York",
# "North Carolina", "Early Modern English", "Second World War"); alone, or before a common word
# ("New data", "Early results"), they stay stop words.
NAME_PREFIXES = frozenset({"new", "north", "south", "east", "west", "upper", "lower", "great",
                           "old", "first", "second", "third", "early", "late", "middle",
                           "central", "united", "saint", "holy", "grand", "little", "big"})

# Lower-case words that may join capitalised words inside one name ("Bank of England",
# "Charles de Gaulle", "Ludwig van Beethoven"). "and" and "&" join only in a name
# that already has "of" or "for" ("Department of Health and Human Services"): "France and
# Germany" and "Charles de Gaulle and Apollo 11" stay apart.
CONNECTORS = frozenset({"of", "de", "du", "des", "del", "della", "der", "den", "van", "von",
                        "la", "le", "da", "di", "do", "dos", "das", "y", "e", "bin", "al", "el",
                        "the", "for", "and", "&"})
AND_CONNECTORS = frozenset({"and", "&"})
AND_ENABLERS = frozenset({"of", "for"})

# Abbreviations whose period does not end a sentence. Titles open a name and are dropped from
# it ("Dr. Smith" names "Smith"); the others stay in the name they close ("Apple Inc.").
TITLES = frozenset({"dr", "mr", "mrs", "ms", "prof", "sir", "dame", "rev", "gen", "col",
                    "capt", "lt", "sgt", "gov", "sen", "rep", "pres", "hon"})
NAME_ABBREVIATIONS = frozenset({"st", "mt", "ft", "inc", "ltd", "corp", "co", "jr", "sr", "bros",
                                "no", "vol", "pt"})
NOT_SENTENCE_END = TITLES | NAME_ABBREVIATIONS | {"vs", "al", "fig", "figs", "eq", "approx",
                                                 "e.g", "i.e", "cf", "etc", "ca", "ref"}

# Units after a number ("5 mg", "3.2 GHz", "10%", "37 °C", "5 mg/kg"). Case matters: "M" is
# molar, "m" metre. Single letters that are common words or grades ("A", "B", "a") are left out.
UNITS = (
    "%", "‰", "percent", "per cent", "°C", "°F", "°", "K",
    "mg", "g", "kg", "µg", "μg", "ug", "ng", "pg", "t", "lb", "lbs", "oz",
    "ml", "mL", "l", "L", "µl", "μl", "µL", "μL", "dl", "dL", "nl", "nL",
    "m", "cm", "mm", "km", "nm", "µm", "μm", "ft", "mi", "mph",
    "s", "ms", "µs", "μs", "ns", "sec", "min", "mins", "h", "hr", "hrs", "d", "wk", "wks", "yr",
    "yrs", "year", "years", "month", "months", "week", "weeks", "day", "days", "hour", "hours",
    "minute", "minutes", "second", "seconds",
    "Hz", "kHz", "MHz", "GHz", "THz", "rpm",
    "KB", "kB", "MB", "GB", "TB", "PB", "Kb", "Mb", "Gb", "bit", "bits", "byte", "bytes", "kbps",
    "Mbps", "Gbps",
    "W", "kW", "MW", "GW", "mW", "Wh", "kWh", "MWh", "J", "kJ", "cal", "kcal", "V", "mV", "kV",
    "mA", "Ω", "dB", "Pa", "kPa", "MPa", "bar", "mmHg", "atm",
    "M", "mM", "µM", "μM", "nM", "pM", "mol", "mmol", "µmol", "μmol", "nmol", "IU", "U",
    "bp", "kb", "kbp", "kDa", "Da",
    "USD", "EUR", "GBP", "dollars", "euros", "million", "billion", "trillion", "thousand",
)

# One alternation, longest first so "mg" is tried before "m"; a unit may be "per" another
# ("mg/kg", "km/h").
_UNIT = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
UNIT_PATTERN = rf"(?:{_UNIT})(?:/(?:{_UNIT}))?"

# An acronym ("NASA", "U.S.", "HIV-1", "mRNA", "CEOs") and a camel hump ("parseHttp", "HTTPServer").
ACRONYM = re.compile(r"(?:[^\W\d_]\.){2,}|[a-z]{0,3}[A-Z][A-Z0-9]*(?:[-&][A-Z0-9]+)*s?")
CAMEL = re.compile(r"[a-z0-9][A-Z]|[A-Z]{2}[a-z]")

# Roman numerals (well-formed ones: "CMLL" is an acronym): part of a name ("World War II") but
# never one alone.
ROMAN = re.compile(r"(?=[MDCLXVI])M{0,4}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")

# Capitalised acronyms that spell a function word but are mostly names ("the US army").
ACRONYMS_NOT_STOP = frozenset({"US", "IT"})
