"""What a text column's cells are written as: units and currencies, accounting negatives,
magnitudes, dates, times, durations, fiscal years and the other notations read as numbers, and
the hints of what a column read as text may hold."""

from __future__ import annotations

import datetime
import re
import unicodedata
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from seba.core.config import SPACES, bare
from seba.core.runtime import lazy_module
from seba.core.own_table.numbers import (NUMERIC_SHARE, SPREADSHEET_ERRORS, _EXACT, _ISO_DATE, _NUMBER_AND_WORD,
                                         _OTHER_DATE, _SPACES, _UNITS, _WORD_AND_NUMBER, _arrow_strings, _ascii,
                                         _factorized, _quote, _zero_padded_text, parse_numbers)

pd = lazy_module("pandas")


def _composed(text: pd.Series) -> tuple[pd.Series, int, int, int]:
    """``text`` (a stripped "string" Series) with every cell in Unicode's composed form (NFC: 'é'
    as one character, not 'e' and a combining accent, as macOS and text copied from some PDFs
    write it), with ' ' for Unicode's other spaces (``SPACES``: a no-break space, as word
    processors and web pages put between words, looks like ' ') and without invisible characters
    at its edges (``INVISIBLE``; a cell of them only is missing), so that one word written either
    way is one level; and how many cells each of the three changed. An ASCII column (most) is
    returned as it is after one check."""
    if _ascii(text) or _arrow_strings(text) is None:
        return text, 0, 0, 0
    # Python's unicodedata over the distinct cells (Arrow's utf8_normalize decomposes whatever form it is asked for)
    read, composed, spaced, edged = {}, [], [], []
    for value in text.dropna().unique():
        if value.isascii():
            continue
        normal = value if unicodedata.is_normalized("NFC", value) else unicodedata.normalize("NFC", value)
        if normal != value:
            composed.append(value)
        plain = normal.translate(SPACES)
        if plain != normal:
            spaced.append(value)
        final = bare(plain)
        if final != plain:
            edged.append(value)
        if final != value:
            read[value] = final
    if not read:
        return text, 0, 0, 0
    counts = [int(text.isin(values).sum()) if values else 0 for values in (composed, spaced, edged)]
    text = text.replace(read)
    return text.mask(text == ""), *counts


def _formulas_note(what: str, cells: int) -> str:
    return (f"{what}: {cells} cell(s) written as Excel's text formula (=\"...\", as exports that keep leading zeros "
            f"write cells) read as the text it gives")


def _spaces_note(what: str, cells: int) -> str:
    return (f"{what}: {cells} cell(s) with a no-break or other Unicode space (which looks like ' ') read with ' ' in "
            f"its place, so that words written with either are one value")


def _invisible_note(what: str, cells: int) -> str:
    return (f"{what}: {cells} cell(s) with an invisible character at their start or end (a zero-width space, word "
            f"joiner or byte-order mark, as text copied from a web page or files joined with their byte-order "
            f"marks carry) read without it")


def _utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _without_unit(text: pd.Series, cells: _Cells | None = None) -> tuple[pd.Series, str | None]:
    """``text`` without the one unit its cells are written with, and that unit: a '%' after a
    number ('12.5%', '12.5 %'), or a currency sign of ``_UNITS`` before or after one ('$1,200',
    '-$5', '$-5', '5 €'); (``text``, None) when no cell has one, or the cells have several
    (``cells``: its distinct cells, when the caller has them)."""
    written = cells.distinct if cells is not None else _distinct(text.dropna())[0]
    found = [unit for unit in _UNITS if written.str.contains(unit, regex=False).any()]
    if len(found) != 1:
        return text, None
    return _without_units(text, found), found[0]


def _without_units(text: pd.Series, units: list[str]) -> pd.Series:
    """``text`` without any of ``units`` after its number ('12.5 %', '5 €'), or, a currency sign,
    before it ('$1,200', '-$5', '$-5')."""
    space = f"[{_SPACES}]*"
    after = "|".join(re.escape(u) for u in units)
    bare = text.str.replace(rf"{space}(?:{after})$", "", regex=True)
    before = "|".join(re.escape(u) for u in units if u != "%")
    return bare.str.replace(rf"^([+-]?){space}(?:{before}){space}", r"\1", regex=True) if before else bare


def _without_word(text: pd.Series, cells: _Cells | None = None) -> tuple[pd.Series, str | None, list[str]]:
    """For a column named in ``numeric``: ``text`` without the one word its numbers are written with,
    after them ('71.3 kg', '120ms') or before them ('USD 1,200'), that word, and []; (``text``,
    None, the words) when no cell has one, or the cells have several ('1374 g' beside '2.2 kg': not
    one scale), or the word is a magnitude suffix beside plain numbers ('1.2k' beside '800': two
    scales, which the text hint names) (``cells``: its distinct cells, when the caller has them)."""
    written = cells.distinct if cells is not None else _distinct(text.dropna())[0]
    found = {}
    for placed, pattern in (("after", _NUMBER_AND_WORD), ("before", _WORD_AND_NUMBER)):
        words = written.str.extract(rf"^{pattern}$")["word"].dropna().unique()
        if len(words):
            found[placed] = list(words)
    if len(found) != 1 or len(words := next(iter(found.values()))) != 1:
        return text, None, [w for placed in found.values() for w in placed]
    placed, word = next(iter(found)), words[0]
    if word in _MAGNITUDES and written.str.fullmatch(_PLAIN).fillna(False).any():  # '1.2k' beside '800'
        return text, None, []
    space = f"[{_SPACES}]*"
    if placed == "after":
        return text.str.replace(rf"{space}{re.escape(word)}$", "", regex=True), word, []
    return text.str.replace(rf"^{re.escape(word)}{space}", "", regex=True), word, []


_MAGNITUDES = ("k", "K", "M", "B", "bn", "mn")  # '1.2k', '2.5M': thousands, millions
_TRUTH = {"true": 1.0, "yes": 1.0, "false": 0.0, "no": 0.0}  # a column named in `numeric`: 1 and 0
_MAGNITUDE_FACTORS = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "bn": 1e9, "mn": 1e6}


def _magnitude_values(text: pd.Series, source) -> tuple[pd.Series, pd.Series]:
    """For a column named in ``numeric``: the value of each cell of ``text`` written with a
    magnitude suffix ('1.2k' is 1200, '3.4 M' 3400000; 'B' and 'bn' billions, 'mn' millions), NaN
    for the others, and the mask of those cells."""
    parts = text.str.extract(rf"^(?P<number>[+-]?\d[\d,.' ]*?)[ ]?(?P<suffix>{'|'.join(_MAGNITUDES)})$")
    mantissa = parse_numbers(parts["number"].astype("string"), source.thousands, source.decimal)
    factor = parts["suffix"].astype(object).map(_MAGNITUDE_FACTORS).astype(float)
    scaled = (mantissa * factor).astype("float64")
    return scaled, pd.Series(scaled.notna().to_numpy(dtype=bool), index=text.index)


def _several_units(column: str, written: pd.Series, source) -> str | None:
    """The warning for a text column of numbers written with several units of ``_UNITS`` ('$5',
    '€5'), which ``_without_unit`` does not take off (they are not one scale), so that the column
    is categorical, its numbers levels: when nearly all its cells (``NUMERIC_SHARE``) are numbers
    with one of those units or none; None otherwise."""
    arrow = _arrow_strings(written)
    if arrow is not None:  # one pass over its distinct cells, in Arrow, for a column with none of the
        import pyarrow.compute as pc  # units (the common case: 0.1 ms for 10,000 cells of a few levels)

        if not pc.any(pc.match_substring_regex(pc.unique(arrow), f"[{re.escape(''.join(_UNITS))}]")).as_py():
            return None
    found = {unit: int(n) for unit in _UNITS if (n := written.str.contains(unit, regex=False).sum())}
    if len(found) < 2:
        return None
    numbers = parse_numbers(_without_units(written, list(found)), source.thousands, source.decimal)
    if numbers.notna().mean() < NUMERIC_SHARE:
        return None
    examples = ", ".join(f"'{written[written.str.contains(u, regex=False)].iloc[0]}'" for u in found)
    return (f"column '{column}' holds numbers written with several units ({_quote(found)}; e.g. {examples}), read "
            f"as categorical text (its numbers are levels): write them in one unit in the file (or one column per "
            f"unit) to read them as numbers")


def _zero_padded(column: str, numbers: pd.Series, values: pd.Series, key: str, record: dict) -> None:
    """A numeric text column some of whose numbers are written with leading zeros ('01470', '007'),
    as zip codes and other codes are: their count in ``record`` (``leading_zeros``) and a notice
    naming the ``categorical`` setting that keeps them as text, or, when one of those numbers is
    also written another way in the column ('007' and '7', which codes keep apart and numbers
    cannot), a warning that names both spellings."""
    padded = _zero_padded_text(numbers)
    if not padded.any():
        return
    read = values.notna().to_numpy() & numbers.notna().to_numpy()
    padded &= read
    first = int(np.argmax(padded))
    example, value = numbers.iloc[first], float(values.iloc[first])
    record["leading_zeros"] = int(padded.sum())
    spelled = pd.DataFrame({"value": values.to_numpy()[read], "cell": numbers.to_numpy()[read]}).drop_duplicates()
    spelled = spelled[spelled["value"].isin(set(values.to_numpy()[padded]))]
    clashes = [sorted(cells) for _, cells in spelled.groupby("value", sort=False)["cell"] if len(cells) > 1]
    count = f"column '{column}': {int(padded.sum())} number(s) written with leading zeros"
    if clashes:
        shown = "; ".join(" and ".join(f"'{c}'" for c in cells[:3]) for cells in clashes[:3])
        record["warnings"].append(
            f"{count}, read as numbers, so that cells written differently are one value ({shown}; "
            f"{len(clashes)} number(s) written in several ways): if '{column}' holds codes, list it in "
            f"'{key}.categorical' to keep them apart")
    else:
        record["notices"].append(
            f"{count} (e.g. '{example}', read as {value:g}); if '{column}' holds codes (zip codes, identifiers), "
            f"list it in '{key}.categorical' to keep them as text")


def _merged_integers(column: str, written: pd.Series, values: pd.Series, key: str, record: dict) -> None:
    """A warning for a column of integers beyond 2**53 (codes, account numbers, ids of 17 digits
    and more) that float64, the type a numeric column is read as, makes one value
    (123456789012345678 and 123456789012345679 are both 1.2345678901234568e+17), naming two
    of them and the ``categorical`` setting that keeps them apart, and their count in ``record``
    (``merged_integers``: the distinct integers that share a value with another). ``written``:
    the cells (text, or an integer column as the file stores it); a column within 2**53 costs
    one comparison."""
    numbers = values.to_numpy(dtype="float64", na_value=np.nan)
    with np.errstate(invalid="ignore"):
        big = np.abs(numbers) >= _EXACT
    if not big.any():
        return
    cells, read = written[big], numbers[big]
    if pd.api.types.is_integer_dtype(cells.dtype):
        plain = np.ones(len(cells), dtype=bool)
        exact = [int(v) for v in cells.to_numpy()]
    else:  # integers written plainly; other spellings (1.2e17) hold no more digits than float64 keeps
        text = cells.astype("string").str.strip()
        plain = text.str.fullmatch(r"[+-]?[0-9]+").fillna(False).to_numpy(dtype=bool)
        exact = [int(t) for t in text.to_numpy()[plain]]
    pairs = pd.DataFrame({"value": read[plain], "integer": pd.Series(exact, dtype=object)}).drop_duplicates()
    merged = [sorted(g) for _, g in pairs.groupby("value", sort=True)["integer"] if len(g) > 1]
    if not merged:
        return
    record["merged_integers"] = int(sum(len(g) for g in merged))
    shown = "; ".join(" and ".join(str(i) for i in g[:2]) for g in merged[:3])
    record["warnings"].append(
        f"column '{column}': {record['merged_integers']} distinct integers beyond 2**53 become {len(merged)} value(s) "
        f"read as numbers (float64 cannot keep them apart: {shown}): if '{column}' holds codes or ids, list it "
        f"in '{key}.categorical' to keep them apart")


def _mostly(written: pd.Series, pattern: str, counts: np.ndarray | None = None) -> bool:
    """Whether ``NUMERIC_SHARE`` of the cells of ``written`` (no missing ones) match ``pattern``
    whole: a vectorised test before the slower extraction of its groups, on the distinct cells
    (a text column of 50,000 cells and a dozen words: 1.2 ms against 10 ms for every cell).
    With ``counts``, ``written`` is distinct cells already and ``counts`` the cells holding each."""
    if written.empty:
        return False
    distinct, counts = (written, counts) if counts is not None else _distinct(written)
    matched = distinct.str.fullmatch(pattern).to_numpy(dtype=bool, na_value=False)
    return int(counts[matched].sum()) / int(counts.sum()) >= NUMERIC_SHARE


def _distinct(written: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """The distinct cells of ``written`` (missing ones left out), in the order they first appear, and how
    many cells hold each."""
    codes, uniques = _factorized(written)
    return uniques, np.bincount(codes[codes >= 0], minlength=len(uniques))


@dataclass(frozen=True)
class _Cells:
    """A text column as its distinct cells: the code of each cell (-1 for a missing one), the
    distinct cells in the order they first appear ("string" dtype), how many cells hold each, and
    the column's index. The rules that read dates and times decide on the distinct cells and
    ``spread`` what they read over the column (a column of 50,000 cells and a dozen words: one
    factorization for all of them)."""
    codes: np.ndarray
    distinct: pd.Series
    counts: np.ndarray
    index: pd.Index

    @classmethod
    def of(cls, text: pd.Series) -> "_Cells":
        codes, distinct = _factorized(text)
        return cls(codes, distinct, np.bincount(codes[codes >= 0], minlength=len(distinct)), text.index)

    def share(self, matched) -> float:
        """The share of the column's non-missing cells whose distinct cell is ``matched`` (a mask)."""
        total = int(self.counts.sum())
        return int(self.counts[np.asarray(matched, dtype=bool)].sum()) / total if total else 0.0

    def spread(self, values) -> pd.Series:
        """``values``, one per distinct cell, as one per cell of the column (missing where the cell is)."""
        return pd.Series(pd.Series(values).array.take(self.codes, allow_fill=True), index=self.index)


def _parenthesised_negatives(text: pd.Series) -> pd.Series | None:
    """``text`` with the numbers written in parentheses, as accounting writes negatives
    ('(1,234.50)', '($5)', '(12%)'), written with a minus instead ('-1,234.50', '-$5', '-12%'),
    when some of its cells are so written and others are not (a column of '(1)', '(2)' only is
    enumeration, not accounting); None otherwise."""
    opened = text.str.startswith("(").fillna(False).astype(bool)  # cheap: most columns have none
    if not opened.any():
        return None
    inner = text[opened].str.extract(r"^\((?P<inner>[^()+\-\u2212]*\d[^()+\-\u2212]*)\)$")["inner"]
    inner = inner.reindex(text.index)
    wrapped = inner.notna() & text.notna()
    if not wrapped.any() or wrapped[text.notna()].all():
        return None
    return text.mask(wrapped, "-" + inner.str.strip())


_BOUND = r"(?P<op><=|>=|=<|=>|[<>\u2264\u2265])[ ]*(?P<number>[^<>=\u2264\u2265 ].*)"  # '<0.5', '>= 100', '≤3'
_TRAILING_MINUS = r"(?P<number>\d[\d,.' ]*)-"  # '1,234.50-', as some accounting exports write negatives
# '3/4', '-3/4', '5 1/2', '5-1/2'
_FRACTION = r"(?:(?P<whole>[+-]?\d+)(?:[ ]+|-)|(?P<sign>[+-]))?(?P<top>\d+)/(?P<bottom>\d+)"
# an approximate number ('~5', '≈ 5', 'ca. 1850', 'approx. 12'), read as the number
_APPROXIMATE = r"(?:[~≈∼]|(?i:ca|approx|circa)\.?(?=[ ]|\d))[ ]*(?P<number>[+-]?\d.*)"
# a number marked as text for a spreadsheet with a leading apostrophe ("'-5.2", as a CSV-injection
# escape and a cell typed as text write it; Excel's text formula, '="00123"', is read as its text first)
_TEXT_MARKED = r"'(?P<quoted>[ ]*[+-]?[\d.,].*)"
# a number with a footnote mark, as statistical tables flag provisional or estimated values and
# significance ('12.5*', '0.03 **', '7†', '3‡'), read as the number
_MARKS = "*\u2020\u2021\u00a7\u00b6"  # * † ‡ § ¶
# fiscal or school years, one year after the other ('2020/21', '2019-2020', 'FY2020/21')
_FISCAL = r"(?:FY[ ]?)?(?P<first>(?:19|20)\d\d)[/-](?P<second>\d{2}|(?:19|20)\d\d)"


def _fiscal_first_years(text: pd.Series) -> pd.Series:
    """The first year of each cell of ``text`` that is a fiscal or school year ('2020/21' is '2020';
    the second year the one after the first), NA for the others."""
    years = text.str.extract(rf"^{_FISCAL}$")
    first = years["first"]
    if first.isna().all():
        return first
    start = pd.to_numeric(first, errors="coerce").to_numpy(dtype=float)
    second = years["second"].astype(object)
    full = second.str.len().eq(4).fillna(False).to_numpy(dtype=bool)
    end = pd.to_numeric(second, errors="coerce").to_numpy(dtype=float)
    after = np.where(full, end - start, (end % 100 - start % 100) % 100)
    return first.where(pd.Series(after == 1, index=text.index))


_FOOTNOTED = rf"(?P<number>[^{_MARKS}]*\d[^{_MARKS}]*?)[ ]*(?:\*+|[{_MARKS[1:]}]+)"
# an angle in degrees, with minutes and seconds or not, as coordinates are written ('45°30′15″N',
# "45° 30' 15\" N", 'S 12°05.5\'', '-73.9857°', '87°'): decimal degrees, south and west negative
# (a fraction after '.' or ',', in any source: an angle has no thousands)
_DEGREES = (r"(?P<lead>[NSEWnsew])?[ ]*(?P<sign>[+-])?(?P<deg>\d{1,3}(?:[.,]\d+)?)[ ]*°"
            r"(?:[ ]*(?P<min>\d{1,2}(?:[.,]\d+)?)[ ]*['\u2032](?:[ ]*(?P<sec>\d{1,2}(?:[.,]\d+)?)[ ]*"
            r"(?:\"|\u2033|''))?)?[ ]*(?P<trail>[NSEWnsew])?")
# a number with Eurostat's flags after it ('12.5 p' provisional, '9.8 e' estimated, '7 bep': b break in
# series, c confidential, d definition differs, e estimated, f forecast, n not significant, p
# provisional, r revised, s Eurostat estimate, u low reliability, z not applicable), beside plain numbers
_FLAGGED = r"(?P<number>[+-]?[\d.,]*\d[\d.,]*)[ ]+(?P<flag>(?!nd$|rd$)[bcdefnprsuz]{1,3})"  # '3 rd': an ordinal
# the notations read on the way to a number that a notice counts alike: the schema field, how the
# cells were written, what they were read as and what the notice adds (``{column}``, ``{key}``)
_NOTATIONS = {"text marked": ("text_marked", "as text for a spreadsheet (with a leading ')", "the number",
                              ": list '{column}' in '{key}.categorical' to keep them as text (codes)"),
              "footnoted": ("footnoted", "with a footnote mark ('*', '†', ...)", "the number without it", ""),
              "flags": ("flagged", "with a statistical flag after them ('p' provisional, 'e' estimated, as "
                                   "Eurostat writes them)", "the number", ""),
              "approximate": ("approximate", "as approximate", "the number", ""),
              "booleans": ("booleans", "as true / false or yes / no", "1 for true, 0 for false", ""),
              "magnitudes": ("magnitudes", "with a suffix for thousands, millions or billions",
                             "their value", ""),
              "fiscal years": ("fiscal_years", "as fiscal or school years", "their first year",
                               ": list '{column}' in '{key}.categorical' to keep them as levels"),
              "degrees": ("degrees", "in degrees (with minutes and seconds or not)",
                          "decimal degrees, south and west negative", ""),
              "powers of ten": ("powers_of_ten", "with a power of ten", "their value", ""),
              "ordinals": ("ordinals", "as ordinals", "their number",
                           ", which keeps their order: list '{column}' in '{key}.categorical' to keep them as levels"),
              "fractions": ("fractions", "as fractions", "their value", "")}
_PLAIN = r"[+-]?\d[\d,.]*"  # a number as the hints below look for one ('1,234.5', '-0.3')
# fractions of one character ('½', '9¾'), read as the fraction they stand for
_VULGAR_PARTS = {chr(c): "/".join(str(k) for k in Fraction(unicodedata.numeric(chr(c))).limit_denominator(10)
                                  .as_integer_ratio()) for c in (*range(0xBC, 0xBF), *range(0x2150, 0x215F))}
_VULGAR = f"[{''.join(_VULGAR_PARTS)}]"
_ORDINAL = r"(?P<number>\d+)[ ]?(?i:st|nd|rd|th)"  # '1st', '22nd', '3rd', '4th', '5 th'
# a number written with a power of ten ('3.2 x 10^6', '1.5×10⁻³', '2*10**4', '10^6'), as lab counts are
_SUPERSCRIPTS = "⁰¹²³⁴⁵⁶⁷⁸⁹"  # ⁰¹²³⁴⁵⁶⁷⁸⁹
_POWER_OF_TEN = (r"(?:(?P<mantissa>[+-]?\d[\d,.]*)[ ]*[x×X*·][ ]*)?10"
                 rf"(?:(?:\^|\*\*)(?P<exp>[+-]?\d+)|(?P<sup>[⁻⁺]?[{_SUPERSCRIPTS}]+))")
# a number with Fortran's exponent letter ('1.6505D+02', '-3.1d-05'), as Fortran programs write
# doubles: the sign after the letter keeps codes ('12D34') and dice ('3D6') out
_FORTRAN = r"(?P<mantissa>[+-]?(?:\d+\.?\d*|\.\d+))[dD](?P<exp>[+-]\d+)"
# ranges of numbers, as binned ages and incomes are written ('40-49', '10 – 20', '$10-$20', '5 to 9'),
# and the open ends beside them ('60+', '65-', '<10', '>= 90')
_RANGE = (r"[$€£]?(?P<low>\d+(?:\.\d+)?)[ ]*(?:-|–|—|to)[ ]*[$€£]?"
          r"(?P<high>\d+(?:\.\d+)?)")
_OPEN_RANGE = r"[$€£]?\d+(?:\.\d+)?[ ]*[+-]|(?:<=|>=|[<>≤≥])[ ]*[$€£]?\d+(?:\.\d+)?"
# a range written as an interval around a name ('100<=X<500', '0 <= x < 200', as credit-g writes them)
_INTERVAL = (r"(?P<low2>[+-]?\d+(?:\.\d+)?)[ ]*(?:<=?|\u2264)[ ]*[A-Za-z]\w*[ ]*(?:<=?|\u2264)[ ]*"
             r"(?P<high2>[+-]?\d+(?:\.\d+)?)")


def _written(values: pd.Series, decimal: str) -> pd.Series:
    """Numbers (float64) as text the number rules read, in the column's decimal mark."""
    return pd.Series([repr(float(v)).replace(".", decimal) for v in values], index=values.index, dtype="string")


def _without_text_mark(text: pd.Series) -> pd.Series:
    """The number each cell of ``text`` holds marked as text for a spreadsheet ("'-5.2" holds
    '-5.2'), NA for every other cell."""
    return text.str.extract(rf"^{_TEXT_MARKED}$")["quoted"].str.strip()


def _other_notations(text: pd.Series, decimal: str,
                     cells: _Cells | None = None) -> tuple[pd.Series | None, dict[str, pd.Series]]:
    """``text`` with numbers written in eleven other notations rewritten as plain numbers: for a
    column that also holds plain ones, bounds ('<0.5', '>100', '≤ 3': a value beyond a detection
    limit, as the limit itself), a minus after the number ('21-') and Eurostat's flags ('12.5 p':
    the number); and fractions ('3/4', '5 1/2', only where no fraction without a whole part is
    above 1, so that '15/3' dates and '120/80' pairs are not read as fractions), ordinals ('1st',
    '2nd': their number), numbers with a power of ten ('3.2 x 10^6', '1.5×10⁻³', Fortran's
    '1.65D+02'), approximate numbers ('~5', 'ca. 1850': the number), fiscal or school years
    ('2020/21', '2005-06': the first year, the second the one after it), angles in degrees
    ('45°30′15″N': decimal degrees), numbers marked as text for a spreadsheet with a leading
    apostrophe ("'-5.2") and numbers with a footnote mark ('12.5*', '0.03**', '7†'): the number, read by
    the other rules as written without the mark; and, per notation, the cells rewritten (a boolean
    mask). None when no cell is so written. Looks at the distinct cells only (``cells``, when the
    caller has them): a categorical column of many rows has few."""
    codes, distinct = (cells.codes, cells.distinct) if cells is not None else _factorized(text)
    if distinct.empty or not distinct.str.contains(
            rf"[<>=\u2264\u2265/~\u2248\u223c]|\d-$|\d[ ]?(?i:st|nd|rd|th)$|10(?:\^|\*\*|[\u207b\u207a{_SUPERSCRIPTS}])"
            rf"|^(?i:ca|approx|circa)|^'|\d[dD][+-]\d|[{_MARKS}]$|\d[ ]*°|\d[ ]+[bcdefnprsuz]{{1,3}}$|{_VULGAR}"
            r"|^(?:FY[ ]?)?(?:19|20)\d\d[/-]\d\d",
            regex=True).any():
        return None, {}
    rewritten, masks = distinct, {}
    marked = _without_text_mark(distinct)
    if marked.notna().any():
        rewritten = rewritten.mask(marked.notna(), marked)
        masks["text marked"] = marked.notna()
    footnoted = rewritten.str.extract(rf"^{_FOOTNOTED}$")["number"]
    if footnoted.notna().any():
        rewritten = rewritten.mask(footnoted.notna(), footnoted.str.strip())
        masks["footnoted"] = footnoted.notna()
    approximate = rewritten.str.extract(rf"^{_APPROXIMATE}$")["number"]
    if approximate.notna().any():
        rewritten = rewritten.mask(approximate.notna(), approximate.str.strip())
        masks["approximate"] = approximate.notna()
    fiscal = _fiscal_first_years(rewritten)  # before fractions: '2000/01' is a year, not 2000
    if fiscal.notna().any():
        rewritten = rewritten.mask(fiscal.notna(), fiscal)
        masks["fiscal years"] = fiscal.notna()
    read = rewritten  # the cells the rules below read: '~1/2' is a fraction, '~3rd' an ordinal
    power = read.str.extract(rf"^{_POWER_OF_TEN}$")
    has = power["exp"].notna() | power["sup"].notna()
    if has.any():
        sup = power["sup"][has].fillna("").str.translate(
            {ord(c): str(i) for i, c in enumerate(_SUPERSCRIPTS)} | {0x207B: "-", 0x207A: "+"})
        exp = power["exp"][has].fillna(sup)
        rewritten = rewritten.mask(has, power["mantissa"][has].fillna("1") + "e" + exp)
        masks["powers of ten"] = has
    fortran = read.str.extract(rf"^{_FORTRAN}$")
    has = fortran["exp"].notna()
    if has.any():
        mantissa = fortran["mantissa"][has].str.replace(".", decimal, regex=False)
        rewritten = rewritten.mask(has, mantissa + "e" + fortran["exp"][has])
        masks["powers of ten"] = masks["powers of ten"] | has if "powers of ten" in masks else has
    angle = read.str.extract(rf"^{_DEGREES}$")
    has = angle["deg"].notna() & ~(angle["lead"].notna() & angle["trail"].notna())
    has &= ~(angle["sign"].notna() & (angle["lead"].fillna(angle["trail"]).notna()))  # '-45°S': which?
    if has.any():
        angle[["deg", "min", "sec"]] = angle[["deg", "min", "sec"]].apply(lambda part: part.str.replace(",", "."))
        minutes, seconds = angle["min"].astype(float).fillna(0.0), angle["sec"].astype(float).fillna(0.0)
        has &= (minutes < 60) & (seconds < 60)
    if has.any():
        side = angle["lead"].fillna(angle["trail"]).fillna("").str.upper()
        sign = np.where(side.isin(["S", "W"]) | angle["sign"].eq("-").fillna(False), -1.0, 1.0)
        value = sign * (angle["deg"].astype(float) + minutes / 60 + seconds / 3600)
        rewritten = rewritten.mask(has, _written(value[has], decimal).reindex(distinct.index))
        masks["degrees"] = has
    ordinal = read.str.extract(rf"^{_ORDINAL}$")["number"]
    if ordinal.notna().any():
        rewritten = rewritten.mask(ordinal.notna(), ordinal)
        masks["ordinals"] = ordinal.notna()
    bound = read.str.extract(rf"^{_BOUND}$")["number"]
    if bound.notna().any() and not bound.notna().all():
        rewritten = rewritten.mask(bound.notna(), bound.str.strip())
        masks["bounds"] = bound.notna()
    flagged = read.str.extract(rf"^{_FLAGGED}$")["number"]
    if flagged.notna().any() and not flagged.notna().all():
        rewritten = rewritten.mask(flagged.notna(), flagged)
        masks["flags"] = flagged.notna()
    trailing = read.str.extract(rf"^{_TRAILING_MINUS}$")["number"]
    if trailing.notna().any() and not trailing.notna().all():
        rewritten = rewritten.mask(trailing.notna(), "-" + trailing.str.strip())
        masks["trailing minus"] = trailing.notna()
    parts = read.str.replace(_VULGAR, lambda m: f" {_VULGAR_PARTS[m.group(0)]}", regex=True).str.strip(
        ).str.extract(rf"^{_FRACTION}$")  # '9½' as '9 1/2'
    has = parts["top"].notna()
    if has.any():
        top, bottom = parts["top"][has].astype(float), parts["bottom"][has].astype(float)
        whole = parts["whole"][has]
        if ((top <= bottom) | whole.notna()).all() and (bottom > 0).all():
            sign = np.where(whole.fillna(parts["sign"][has].fillna("")).str.startswith("-"), -1.0, 1.0)
            value = whole.fillna("0").astype(float) + sign * top / bottom
            rewritten = rewritten.mask(has, _written(value, decimal).reindex(distinct.index))
            masks["fractions"] = has
    if not masks:
        return None, {}
    present = codes >= 0
    cells = np.where(present, rewritten.to_numpy(dtype=object)[codes], None)
    return (pd.Series(cells, index=text.index, dtype="string"),
            {k: pd.Series(present & m.to_numpy(dtype=bool)[codes], index=text.index) for k, m in masks.items()})


def _text_hint(column: str, cells: _Cells, key: str, date_order: str | None = None) -> str | None:
    """What a categorical text column may really hold, when nearly all its cells (``NUMERIC_SHARE``)
    look alike: dates that are not ISO's, two numbers written with '/' ('120/80', '22/7': not
    fractions, which are numbers), two numbers written with 'x' or ', ' ('1920x1080', '40.71, -74.01'),
    a number and its uncertainty ('0.3 ± 0.2'), numbers with magnitude suffixes ('1.2k', '2.5M'),
    ranges of numbers ('40-49', '60+'), numbers after or before one unit that is not read
    ('5 kg', 'USD 5') or a few ('5 kg', '500 g'), feet and inches ('5\'11"'), or a list or mapping
    per cell ('[1, 2]', '{"a": 1}');
    None otherwise. Looks at the distinct cells (in the order they first appear, so the examples
    are the file's first)."""
    written, counts = cells.distinct, cells.counts
    if written.empty:
        return None
    if _mostly(written, _CONTAINER, counts):  # '[1, 2]', "['red', 'blue']", '{"a": 1}', '(3, 4)'
        held = written[written.str.fullmatch(_CONTAINER).fillna(False).astype(bool)]
        example = held[held.str.len() > 2].iloc[0] if (held.str.len() > 2).any() else held.iloc[0]  # not '[]'
        return (f"column '{column}' holds a list or a mapping per cell (e.g. '{example}'), read as categorical text, "
                f"each distinct one a level: write its items as columns of their own in the file (a column per "
                f"position, or a 0/1 column per item a cell may hold)")
    digits = written.str.contains(r"\d", regex=True).to_numpy(dtype=bool)
    ranges = _ranges_hint(column, cells, digits)
    if ranges or cells.share(digits) < NUMERIC_SHARE:
        return ranges  # the other hints are of cells with digits (a column of words: one match)
    needed = NUMERIC_SHARE * int(counts.sum())  # cells, for the unit's word
    if _mostly(written, _OTHER_DATE, counts):
        order, example = _order_shown(written)
        lead = f"column '{column}' holds dates written day and month (e.g. '{example}'), read as categorical text: "
        if order in ("dmy", "mdy"):
            wrong = f", not as date_order: {date_order} reads them" if date_order else ""
            return lead + (f"they are {'day' if order == 'dmy' else 'month'} first{wrong}: set date_order: {order} "
                           f"in '{key}' to read them as numbers (days)")
        if order == "both":  # days above 12 in both places: no one order reads them
            return lead + "they mix both orders: write them as YYYY-MM-DD in the file to read them as numbers (days)"
        return lead + (f"no cell tells the order (no day above 12): set date_order: dmy (31/01/2020) or mdy "
                       f"(01/31/2020) in '{key}' to read them as numbers (days)")
    if _mostly(written, r"\d+/\d+", counts):  # fractions under 1 would be numbers: '120/80', '15/3'
        example = written[written.str.fullmatch(r"\d+/\d+")].iloc[0]
        return (f"column '{column}' holds two numbers per cell, written with '/' (e.g. '{example}'), read as "
                f"categorical text: if they are a day and a month, write them as dates with the year; if two "
                f"measurements (a blood pressure), as two columns in the file")
    # '1920x1080', '40.71, -74.01', and with a colon ('1:3', '2 : 1'), as ratios and scores are written
    # (clock times, '12:30', are read as hours before any hint)
    pair = rf"{_PLAIN}[ ]*[x\u00d7:][ ]*{_PLAIN}|{_PLAIN}[,;][ ]+{_PLAIN}"
    if _mostly(written, pair, counts):
        example = written[written.str.fullmatch(pair)].iloc[0]
        ratio = " or their ratio as one number" if ":" in example else ""
        return (f"column '{column}' holds two numbers per cell (e.g. '{example}'), read as categorical text: if "
                f"they are two measurements (a width and a height, a latitude and a longitude, a match's score), "
                f"write them as two columns in the file{ratio}")
    if _mostly(written, rf"{_PLAIN}[ ]*(?:±|\+/-|\+-)[ ]*{_PLAIN}", counts):  # '0.3 ± 0.2'
        example = written[written.str.contains("±|\\+/?-", regex=True)].iloc[0]
        return (f"column '{column}' holds a number and its uncertainty per cell (e.g. '{example}'), read as "
                f"categorical text: write the value and its uncertainty as two columns in the file")
    magnitude = written.str.extract(rf"^{_PLAIN}[ ]?(?P<suffix>{'|'.join(_MAGNITUDES)})$")["suffix"]
    if magnitude.notna().any() and _mostly(written, rf"{_PLAIN}(?:[ ]?(?:[kKMB]|bn|mn))?", counts):  # '1.2k', '800'
        example = written[magnitude.notna()].iloc[0]
        return (f"column '{column}' holds numbers written with magnitude suffixes (e.g. '{example}'), read as "
                f"categorical text: if they are magnitudes (k thousands, M millions, B billions), list '{column}' "
                f"in '{key}.numeric' to read them as their values ('1.2k' as 1200)")
    if _mostly(written, _FEET_AND_INCHES, counts):  # '5\'11"': a unit per number, not one to remove
        example = written[written.str.fullmatch(_FEET_AND_INCHES)].iloc[0]
        return (f"column '{column}' holds two numbers per cell written with ' and \" (e.g. '{example}'), feet and "
                f"inches or minutes and seconds, read as categorical text: write each as one number in the file "
                f"(inches, seconds) to read them as numbers")
    # plain numbers beside them ('70' beside '71.3 kg') count with a word, which 'numeric' reads alike
    plain = int(counts[written.str.fullmatch(_PLAIN).fillna(False).to_numpy(dtype=bool)].sum())
    for pattern, placed in ((_NUMBER_AND_WORD, "followed by"), (_WORD_AND_NUMBER, "preceded by")):  # 'USD 1,200'
        words = written.str.extract(rf"^{pattern}$")["word"]
        common = pd.Series(counts, index=written.index).groupby(words).sum().sort_values(ascending=False)
        if len(common) and common.iloc[0] + plain >= needed and common.iloc[0] > plain:
            word = common.index[0]
            return (f"column '{column}' holds numbers {placed} '{word}' (e.g. '{written[words == word].iloc[0]}'), "
                    f"read as categorical text: if '{word}' is a unit, list '{column}' in '{key}.numeric' to read "
                    f"them as the numbers without it")
        # a few words, each too rare alone ('1374 g' beside '2.2 kg'): units of one quantity, most likely;
        # not letters before numbers ('A15', 'C85': a cabin, a grid square, a seat), which are codes
        lettered = placed == "preceded by" and all(len(str(w)) == 1 for w in common.index)
        if 1 < len(common) <= _FEW_UNITS and common.sum() >= needed and not lettered:
            shown = ", ".join(f"'{w}' (e.g. '{written[words == w].iloc[0]}')" for w in common.index[:3])
            return (f"column '{column}' holds numbers {placed} {len(common)} different words ({shown}"
                    f"{', ...' if len(common) > 3 else ''}), read as categorical text: if they are units of one "
                    f"quantity, convert every cell to one unit and remove it in the file to read them as numbers")
    return None


# a list, a tuple or a mapping in a cell, as a program's list column is written out ('[1, 2]', '{"a": 1}')
_CONTAINER = r"\[.*\]|\{.*\}|\(.*, .*\)"  # a tuple as Python writes one: '(1,234.50)' is accounting's
# feet and inches, or minutes and seconds (5'11", 6' 2.5", 5′11″, 1'30''): two numbers, each with its
# unit; the second of one or two digits, as a thousands group (1'234) is not
_FEET_AND_INCHES = r"\d+[ ]*['\u2032][ ]*\d{1,2}(?:\.\d+)?[ ]*(?:\"|\u2033|'')?"
_FEW_UNITS = 5  # the most words a column's numbers are written with that its hint takes for units


def _ranges_hint(column: str, cells: _Cells, digits: np.ndarray) -> str | None:
    """The notice for a column of ranges of numbers ('40-49', '$10-$20', '100<=X<500', with open ends
    '60+', '<100', '>=1000'), when they are nearly all (``NUMERIC_SHARE``) of its cells with digits
    (``digits``, a mask of the distinct cells) and those at least half its cells: the levels beside
    them are words ('no checking'). Each closed range's low end below its high end ('3-1' is a
    score), and month-year cells ('01-2020') are not ranges. None otherwise."""
    if cells.share(digits) < 0.5:
        return None
    written = cells.distinct
    ranges = written.str.extract(rf"^(?:{_RANGE}|{_INTERVAL})$")
    low, high = ranges["low"].fillna(ranges["low2"]), ranges["high"].fillna(ranges["high2"])
    closed = low.notna().to_numpy()
    ranged = written.str.fullmatch(_OPEN_RANGE).to_numpy(dtype=bool, na_value=False) | closed
    if not closed.any() or cells.share(ranged & digits) < NUMERIC_SHARE * cells.share(digits):
        return None
    low, high = low[closed].astype(float), high[closed].astype(float)
    if not (low < high).all() or ((low <= 12).all() and high.map(lambda v: 1900 <= v < 2100 and v == int(v)).all()):
        return None  # '3-1' is a score, '01-2020' a month
    return (f"column '{column}' holds ranges of numbers (e.g. '{written[closed].iloc[0]}'), read as categorical "
            f"levels, which keep them apart but not their order: to use the order, write one number per cell in "
            f"the file (the middle of each range, or its lower end)")


def _order_shown(written: pd.Series) -> tuple[str | None, str]:
    """The order that dates written day and month (``written``: no missing cells) show, and a cell
    that shows it: 'dmy' (a number above 12 first, none second), 'mdy' (the reverse), 'both'
    (above 12 in both places) or None (nowhere)."""
    parts = written.str.extract(rf"^{_OTHER_DATE}$")
    first, second = (parts[k].dropna().astype(int) for k in ("first", "second"))
    if (first > 12).any() and not (second > 12).any():
        return "dmy", written[first.index[first > 12][0]]
    if (second > 12).any() and not (first > 12).any():
        return "mdy", written[second.index[second > 12][0]]
    return ("both" if (first > 12).any() else None), written.iloc[0]


def _misread_dates(written: pd.Series, date_order: str | None) -> bool:
    """Whether ``written`` (no missing cells) is dates written day and month in another order than
    the ``date_order`` set."""
    return date_order is not None and _mostly(written, _OTHER_DATE) and _order_shown(written)[0] != date_order


def _full_years(year: pd.Series) -> pd.Series:
    """Years written with two or four digits (text) as four-digit integers ("Int64"), a two-digit
    year read as Python's %y does: 69-99 are 1969-1999, 00-68 are 2000-2068."""
    number = year.astype("Int64")
    short = year.str.len() == 2
    return number.mask(short & (number >= 69), number + 1900).mask(short & (number < 69), number + 2000)


def _ordered_dates(cells: _Cells, order: str) -> pd.Series | None:
    """The timestamps of a text column of dates written day / month / year (``order`` 'dmy') or
    month / day / year ('mdy'), ``NUMERIC_SHARE`` of its cells (NaT for the others and for dates
    that do not exist, 31/02/2020); None for a column that is not one. A two-digit year is read as
    Python's %y does: 69-99 are 1969-1999, 00-68 are 2000-2068."""
    if cells.distinct.empty or not _mostly(cells.distinct, _OTHER_DATE, cells.counts):
        return None
    parts = cells.distinct.str.extract(rf"^{_OTHER_DATE}$")
    day, month = (parts["first"], parts["second"]) if order == "dmy" else (parts["second"], parts["first"])
    year = _full_years(parts["year"])
    iso = (year.astype("string").str.zfill(4) + "-" + month.str.zfill(2) + "-" + day.str.zfill(2)
           + (" " + parts["time"].str.zfill(5)).fillna(""))
    return cells.spread(pd.to_datetime(iso.astype(object), format="ISO8601", errors="coerce"))


_MONTHS = {name: k + 1 for k, names in enumerate(
    [("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",), ("jun", "june"),
     ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"), ("oct", "october"), ("nov", "november"),
     ("dec", "december")]) for name in names}
# dates written with an English month name: '05-Jan-2020', '5 January 2020' (day first) and
# 'Jan 5, 2020', 'January 5 2020' (month first); the name says which number is the day
_NAMED_DATES = (r"(?P<d1>\d{1,2})[ /.-](?P<m1>[A-Za-z]{3,9})\.?[ /.-](?P<y1>\d{4}|\d{2})",
                r"(?P<m2>[A-Za-z]{3,9})\.? (?P<d2>\d{1,2}),? (?P<y2>\d{4})")


def _month_name_dates(cells: _Cells) -> pd.Series | None:
    """The timestamps of a text column of dates written with an English month name (``_NAMED_DATES``,
    ``NUMERIC_SHARE`` of its cells; NaT for the others and for dates that do not exist); None for
    a column that is not one. Which number is the day needs no setting: the name is the month. A
    two-digit year is read as ``_full_years`` reads it. A column none of whose first 20 distinct
    cells is such a date costs one match."""
    levels = cells.distinct
    pattern = rf"^(?:{_NAMED_DATES[0]}|{_NAMED_DATES[1]})$"
    if levels.empty or not levels[:20].str.match(pattern).fillna(False).any():
        return None
    parts = levels.str.extract(pattern)
    month = parts["m1"].fillna(parts["m2"]).str.lower().map(_MONTHS)
    day, year = parts["d1"].fillna(parts["d2"]), _full_years(parts["y1"].fillna(parts["y2"]))
    iso = (year.astype("string").str.zfill(4) + "-" + month.astype("Int64").astype("string").str.zfill(2) + "-"
           + day.str.zfill(2))
    named = month.notna().to_numpy()
    if cells.share(named) < NUMERIC_SHARE:
        return None
    return cells.spread(pd.to_datetime(iso.where(named).astype(object), format="ISO8601", errors="coerce"))


# a month, a quarter or an ISO week without a day ('2020-01', '2020-Q1', 'Q1 2020', '2020-W05'), read
# as its first day (a week's Monday, or the weekday given: '2020-W05-3'); '01/2020', '1-2020' (the
# month first, then a year 1900-2099) is a month too, '5-5000' a range
_MONTH_OR_QUARTER = (r"(?P<y>\d{4})-(?P<m>0[1-9]|1[0-2])|(?P<m2>0?[1-9]|1[0-2])[/-](?P<y2>(?:19|20)\d{2})"
                     r"|(?P<qy>\d{4})[ -]?Q(?P<q>[1-4])|Q(?P<q2>[1-4])[ -]?(?P<qy2>\d{4})"
                     r"|(?P<wy>\d{4})-?W(?P<w>0[1-9]|[1-4]\d|5[0-3])(?:-?(?P<wd>[1-7]))?")


def _months_or_quarters(cells: _Cells) -> tuple[pd.Series | None, str]:
    """The timestamps of a text column of months ('2020-01', ISO's way, or '01/2020'), quarters
    ('2020-Q1', '2020 Q1', 'Q1 2020') or ISO weeks ('2020-W05', '2020W05', '2020-W05-3'), each its
    first day (a week's Monday, or the weekday it gives), ``NUMERIC_SHARE`` of its cells (NaT for the
    others; a week 53 that its year does not have is one), and what it holds ('months (each its first
    day)'); (None, '') for a column that is none of them. Months beside full ISO dates without a
    time zone ('2020-01' and '2020-01-15', as a register with some days unknown writes them) are
    read together, each month as its first day."""
    levels = cells.distinct
    if levels.empty or not levels[:20].str.fullmatch(rf"{_MONTH_OR_QUARTER}|{_ISO_DATE}").fillna(False).any():
        return None, ""
    parts = levels.str.extract(rf"^(?:{_MONTH_OR_QUARTER})$")
    if not parts.notna().to_numpy().any():  # full dates only (too few of them for _iso_dates)
        return None, ""
    if len(levels) > 2 and _fiscal_first_years(levels).notna().all():  # '2005-06', '2006-07': fiscal years
        return None, ""
    quarter = parts["q"].fillna(parts["q2"]).astype("Int64")
    month = parts["m"].fillna(parts["m2"]).astype("Int64").fillna(3 * quarter - 2)
    year = parts["y"].fillna(parts["y2"]).fillna(parts["qy"]).fillna(parts["qy2"])
    iso = year + "-" + month.astype("string").str.zfill(2) + "-01"
    week = parts["w"].notna().to_numpy()
    if week.any():
        weekly = (parts["wy"] + "-W" + parts["w"] + "-" + parts["wd"].fillna("1"))[week]
        days = pd.Series([_iso_week_day(w) for w in weekly], index=weekly.index, dtype="string")
        iso = iso.where(~week, days)
    found = iso.notna().to_numpy()
    counts = {"months": int(parts["m"].notna().sum() + parts["m2"].notna().sum()),
              "quarters": int(quarter.notna().sum()), "weeks": int(week.sum())}
    what = max(counts, key=counts.get)
    what = {"months": "months (each its first day)", "quarters": "quarters (each its first day)",
            "weeks": "ISO weeks (each its Monday, or the weekday given)"}[what]
    if cells.share(found) < NUMERIC_SHARE:
        dated = levels.str.fullmatch(_ISO_DATE).to_numpy(dtype=bool, na_value=False) & ~found
        zoned = levels[dated].str.contains(r"(?:Z|[+-]\d{2}:?\d{2})$", regex=True).fillna(False).astype(bool)
        if not counts["months"] or not dated.any() or zoned.any() or cells.share(found | dated) < NUMERIC_SHARE:
            return None, ""
        iso = iso.where(found, levels.where(dated))
        found, what = found | dated, "dates and months (each month its first day)"
    return cells.spread(pd.to_datetime(iso.where(found).astype(object), format="ISO8601", errors="coerce")), what


def _iso_week_day(week: str) -> str | None:
    """'2020-W05-3' (an ISO year, week and weekday) as its date, '2020-01-29'; None for a week its
    year does not have (week 53 of 2021)."""
    try:
        day = datetime.datetime.strptime(week, "%G-W%V-%u").date()
    except ValueError:
        return None
    return day.isoformat() if day.isocalendar()[:2] == (int(week[:4]), int(week[6:8])) else None


_CLOCK = r"(?P<h>\d{1,3}):(?P<m>\d{2})(?::(?P<s>\d{2}(?:\.\d+)?))?(?:[ ]?(?P<half>[AaPp])\.?[Mm]\.?)?"


def _clock_times(cells: _Cells) -> pd.Series | None:
    """A text column of times written hours:minutes[:seconds] ('12:30', '7:05:30', '7:05 PM';
    ``NUMERIC_SHARE`` of its cells) as hours (12.5); NaN for the other cells and for minutes or
    seconds of 60 and more, or an hour past 12 with AM / PM. None for a column that is not one.
    Hours past 23 without AM / PM are kept: a duration written hours:minutes ('125:30')."""
    if cells.distinct.empty or not _mostly(cells.distinct, _CLOCK, cells.counts):
        return None
    parts = cells.distinct.str.extract(rf"^{_CLOCK}$")
    hours, minutes = parts["h"].astype("Float64"), parts["m"].astype("Float64")
    seconds = parts["s"].astype("Float64").fillna(0)
    half = parts["half"].str.lower()
    bad = (minutes >= 60) | (seconds >= 60) | (half.notna() & ((hours > 12) | (hours == 0)))
    hours = hours.mask(half.notna() & (hours == 12), 0) + 12 * (half == "p").astype("Float64").fillna(0)
    value = hours + minutes / 60 + seconds / 3600
    return cells.spread(value.mask(bad.fillna(False)).astype("float64"))


# a duration written with its units ('1h 30m', '2 hours 5 minutes', '1d 2h', '90s'): days, hours,
# minutes, seconds, each at most once, in that order
_UNIT_PART = r"(?P<{0}>\d+(?:\.\d+)?)[ ]?{1}[ ,]*"
_DURATION = ("(?=\\d)(?:" + _UNIT_PART.format("d", "d(?:ays?)?") + ")?(?:" + _UNIT_PART.format("h", "h(?:ours?|rs?)?")
             + ")?(?:" + _UNIT_PART.format("m", "m(?:in(?:ute)?s?)?") + ")?(?:"
             + _UNIT_PART.format("s", "s(?:ec(?:ond)?s?)?") + ")?")
_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def _unit_durations(cells: _Cells) -> pd.Series | None:
    """A text column of durations written with their units ('1h 30m', '45m', '2 hours'; ``NUMERIC_SHARE``
    of its cells) as seconds (5400.0); NaN for the other cells. None for a column that is not one,
    and for one whose cells all name the same one unit ('45 min', '5m': a number with a unit, which
    the text hint names, and 'm' may be metres): only two units in a cell, or across the column,
    make them durations."""
    written = cells.distinct
    if written.empty or not written[:20].str.contains(r"\d[ ]?[dhmsDHMS]", regex=True).any():
        return None
    parts = written.str.extract(rf"^{_DURATION}$", flags=re.IGNORECASE)
    units = parts.notna()
    matched = units.any(axis=1).to_numpy()
    if cells.share(matched) < NUMERIC_SHARE or units[matched].any(axis=0).sum() < 2:
        return None
    return cells.spread(sum(parts[k].astype(float).fillna(0) * v for k, v in _SECONDS.items()).where(matched))


# a duration as pandas writes a timedelta ('2 days 03:15:00', '-1 days +23:00:00', '0 days
# 00:00:00.500000') or Python's str() does ('1 day, 2:03:04'): whole days, signed, and a clock
_TIMEDELTA = (r"(?:(?P<d>-?\d+) days?,? )?(?P<sign>[+-])?(?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2}(?:\.\d+)?)")
# an ISO 8601 duration ('P2DT3H', 'PT45M', 'P1W', 'P1Y2M'): years, months, weeks, days, hours,
# minutes, seconds
_ISO_NUMBER = r"\d+(?:[.,]\d+)?"
_ISO_DURATION = (rf"(?P<neg>-)?P(?=[\dT])(?:(?P<y>{_ISO_NUMBER})Y)?(?:(?P<mo>{_ISO_NUMBER})M)?"
                 rf"(?:(?P<w>{_ISO_NUMBER})W)?(?:(?P<d>{_ISO_NUMBER})D)?"
                 rf"(?:T(?=\d)(?:(?P<h>{_ISO_NUMBER})H)?(?:(?P<m>{_ISO_NUMBER})M)?(?:(?P<s>{_ISO_NUMBER})S)?)?")


def _written_durations(cells: _Cells) -> tuple[pd.Series, str] | None:
    """A text column of durations as pandas writes a timedelta ('2 days 03:15:00') or in ISO 8601
    ('PT2H30M'; ``NUMERIC_SHARE`` of its cells) as seconds, NaN for the other cells, and what they
    are; None for a column that is neither (a column of clocks alone, '03:15:00', is times)."""
    written = cells.distinct
    head = written[:20]
    if head.str.contains("day", regex=False).any():
        pattern, what = _TIMEDELTA, "durations written as days and hours:minutes:seconds"
    elif head.str.match(r"-?P[\dT]").any():
        pattern, what = _ISO_DURATION, "ISO 8601 durations"
    else:
        return None
    if not _mostly(written, pattern, cells.counts):
        return None
    parts = written.str.extract(rf"^{pattern}$")
    matched = parts.notna().any(axis=1)
    if pattern is _TIMEDELTA:
        if parts["d"].isna().all():
            return None
        clock = parts["h"].astype(float) * 3600 + parts["m"].astype(float) * 60 + parts["s"].astype(float)
        clock = clock.mask(parts["sign"].eq("-").fillna(False).astype(bool), -clock)
        bad = (parts["m"].astype(float) >= 60) | (parts["s"].astype(float) >= 60)
        seconds = (parts["d"].astype(float).fillna(0) * 86400 + clock).mask(bad)
    else:
        amounts = {k: parts[k].str.replace(",", ".", regex=False).astype(float) for k in ("y", "mo", "w", "d", "h", "m", "s")}
        matched &= pd.concat(amounts.values(), axis=1).notna().any(axis=1)
        lengths = (("y", 365.2425 * 86400), ("mo", 30.436875 * 86400), ("w", 604800.0), *_SECONDS.items())
        seconds = sum(amounts[k].fillna(0) * v for k, v in lengths)
        seconds = seconds.mask(parts["neg"].eq("-").fillna(False).astype(bool), -seconds)
        if pd.concat([amounts["y"], amounts["mo"]], axis=1).notna().any(axis=None):
            what += " (a year 365.2425 days and a month 30.436875, their average lengths)"
    return cells.spread(seconds.where(matched).astype("float64")), what


def _iso_dates(cells: _Cells) -> pd.Series | None:
    """The timestamps of a text column of ISO 8601 dates (``NUMERIC_SHARE`` of its cells; NaT for
    the others), in UTC where any cell gives a zone; None for a column that is not one."""
    iso = cells.distinct.str.fullmatch(_ISO_DATE).to_numpy(dtype=bool, na_value=False)
    if cells.distinct.empty or cells.share(iso) < NUMERIC_SHARE:
        return None
    dates = cells.distinct.where(iso).astype(object)
    zoned = dates.str.contains(r"(?:Z|[+-]\d{2}:?\d{2})$", regex=True).fillna(False).astype(bool).any()
    return cells.spread(pd.to_datetime(dates, format="ISO8601", utc=zoned, errors="coerce"))


def _time_as_numbers(series: pd.Series) -> tuple[pd.Series, str]:
    """A parquet timestamp column as days since its earliest timestamp (in UTC, for one with a
    time zone), a duration column as seconds (float64, missing where the cell is); and what the
    numbers count. Counting from the earliest keeps the float32 table's resolution (days since
    1970 would keep about three minutes)."""
    if pd.api.types.is_timedelta64_dtype(series):
        return series / pd.Timedelta(seconds=1), "seconds"
    zone = " UTC" if getattr(series.dt, "tz", None) is not None else ""
    if zone:
        series = series.dt.tz_convert("UTC").dt.tz_localize(None)
    return (series - series.min()) / pd.Timedelta(days=1), f"days since the column's earliest, {series.min()}{zone}"


def _note_time(record: dict, what: str, cells: pd.Series, values: pd.Series, counted: str) -> None:
    """Record what the numbers of a date, timestamp or duration column count, with a notice that
    shows one cell and its number."""
    record["time_as"] = counted
    first = values.first_valid_index()
    if first is not None:
        record["notices"].append(f"column '{record['column']}': {what} read as numbers, {counted} (e.g. "
                                 f"'{cells[first]}' is {values[first]:g})")


def _split_errors(tokens: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """Missing-value tokens found (token -> cells) as the missing-value marks and the spreadsheet errors."""
    return ({k: v for k, v in tokens.items() if k not in SPREADSHEET_ERRORS},
            {k: v for k, v in tokens.items() if k in SPREADSHEET_ERRORS})


def _note_marks(record: dict, column: str, tokens: dict[str, int]) -> None:
    """The notices for a column's cells read as missing for their token (token -> cells): the
    missing-value marks, and apart from them the spreadsheet errors (a formula that failed)."""
    marks, errors = _split_errors(tokens)
    if marks:
        record["notices"].append(f"column '{column}': {sum(marks.values())} cell(s) marked missing ({_quote(marks)})")
    if errors:
        record["notices"].append(_errors_note(f"column '{column}'", errors))


def _errors_note(what: str, errors: dict[str, int]) -> str:
    return (f"{what}: {sum(errors.values())} cell(s) hold a spreadsheet formula's error ({_quote(errors)}), read "
            f"as missing: the formula's value is unknown")


def _uncomputed_note(what: str, cells: int, first: str) -> str:
    return (f"{what}: {cells} cell(s) hold a formula whose value the workbook does not store (the first: {first}), "
            f"read as missing: a file written by a program that does not compute formulas is so; open and save it "
            f"in Excel or LibreOffice, which stores the values")
