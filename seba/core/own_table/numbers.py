"""Numbers as a user's table writes them: the missing-value marks, the patterns the other modules
match, ``parse_numbers`` (a column of numbers in a thousands / decimal convention) and the fast path
that reads columns of plain numbers at once."""

from __future__ import annotations

import functools
import re
import unicodedata

import numpy as np

from seba.core.runtime import lazy_module

pd = lazy_module("pandas")


# What a spreadsheet shows in a cell whose formula failed, and a CSV it saves holds: Excel's and
# Google Sheets' errors ('#N/A', also a missing mark of pandas, is in MISSING_TOKENS) and
# LibreOffice's 'Err:5xx' codes. The formula's value is unknown, so the cell is missing.
SPREADSHEET_ERRORS = frozenset({"#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NUM!", "#NULL!", "#SPILL!", "#CALC!",
                                "#FIELD!", "#BLOCKED!", "#CONNECT!", "#BUSY!", "#UNKNOWN!", "#PYTHON!",
                                "#GETTING_DATA", "#ERROR!", *(f"Err:{code}" for code in range(501, 541))})
# Cells read as missing in every column of a local table: the tokens pandas reads as missing by
# default, "?" (the UCI / OpenML mark), ":" (Eurostat's "not available"), ".." (the World Bank's,
# the OECD's and the UN's) and the spreadsheet errors. Matched after stripping spaces, case-sensitive.
MISSING_TOKENS = frozenset({"", "?", ":", "..", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan",
                            "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan",
                            "null"}) | SPREADSHEET_ERRORS
NUMERIC_SHARE = 0.95  # a text column is numeric when this share of its non-missing cells are numbers
_INDEX_NAME = re.compile(r"Unnamed: \d+")  # pandas' name for a header-less column (a written index)
_INFINITY = r"[+-]?(?:inf|infinity)"
# (thousands, decimal) conventions tried on a text column that is not numeric as configured
_CONVENTIONS = ((None, "."), (",", "."), (None, ","), (".", ","), (" ", ","), (" ", "."), ("'", "."))
_SHOWN = 5  # tokens / rows quoted in one message
# the unit a text column's numbers may be written with: a percent sign after them, or a currency sign
# before or after them ('12.5%', '$1,200', '-$5', '5 €'); the numbers are read without it
_UNITS = ("%", "$", "€", "£", "¥", "₹")
# a number followed by a unit of letters (or symbols) that ``_UNITS`` does not take off: '5 kg', '120ms'
_NUMBER_AND_WORD = r"[+-]?\d[\d,.' ]*?[ ]*(?P<word>[^\d\s+\-,.'][^\d\s]*)"
# a unit of letters before a number ('USD 1,200', 'EUR 5', 'No. 7')
_WORD_AND_NUMBER = r"(?P<word>[^\W\d_][^\d\s]*)[ ]*[+-]?\d[\d,.' ]*"
# ISO 8601 dates, optionally with a time and a zone ('2020-01-31', '2020-01-31T12:00:00Z'): read as numbers
_ISO_DATE = r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
# dates written day / month / year or month / day / year (one separator, '/', '-' or '.'; optionally a
# time), which no rule can tell apart: read in the source's date_order, else left as text
_OTHER_DATE = (r"(?P<first>\d{1,2})(?P<sep>[/.-])(?P<second>\d{1,2})(?P=sep)(?P<year>\d{2}|\d{4})"
               r"(?:[ T](?P<time>\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?))?")


# a space as thousands separator: also the no-break spaces that spreadsheets write between digit groups
_SPACES = " \u00a0\u202f"
# a number written with a leading zero before another digit ('01470', '-05', '007.5'), as codes are
_ZERO_PADDED = r"[+-]?0\d"


def _separator(thousands: str | None) -> str | None:
    """The regular expression of a thousands separator (a space stands for every kind of space)."""
    if thousands is None:
        return None
    return f"[{_SPACES}]" if thousands == " " else re.escape(thousands)


@functools.cache
def _ascii_digits(decimal: str) -> dict[int, str]:
    """``str.translate``'s table from the decimal digits of every script Unicode has (Arabic-Indic
    '١٢', Persian '۱۲', Devanagari '१२', full-width '１２', ...) to '0'-'9', the full-width '．',
    '，', '－', '＋' to their ASCII forms and the Arabic decimal separator '٫' to ``decimal``: built
    once, when a column of numbers is not ASCII (22 ms)."""
    table = {c: str(unicodedata.decimal(chr(c))) for c in range(0x80, 0x30000)
             if unicodedata.category(chr(c)) == "Nd"}
    return {**table, 0xFF0E: ".", 0xFF0C: ",", 0xFF0D: "-", 0xFF0B: "+", 0x066B: decimal}


_OTHER_DIGIT = r"(?![0-9])\d"  # a decimal digit of another script than ASCII's
# a dash before a number, as typeset text writes a minus: figure and en dash, small and fullwidth hyphen-minus
_DASH_MINUS = r"^[\u2012\u2013\ufe63\uff0d](?=[\d.,])"


_REPEATS_SEEN = 1024  # the first cells of a column that tell whether its values repeat


def parse_numbers(text: pd.Series, thousands: str | None = None, decimal: str = ".") -> pd.Series:
    """float64 values of the cells of ``text`` (stripped strings, "string" dtype) written as numbers
    with the given thousands separator (digit groups of three, optional) and decimal mark;
    ``inf`` / ``infinity`` in any case and sign are infinite; NaN for every other cell. The minus
    sign U+2212, as typeset text writes it ('−5'), is a minus; digits of other scripts
    ('١٢٫٥', '１２．５') are their digits (``_ascii_digits``)."""
    if thousands is None and decimal == ".":
        values = _plain_floats(text)
        if values is not None:
            return values
    if len(text) > _REPEATS_SEEN and text.iloc[:_REPEATS_SEEN].nunique() <= _REPEATS_SEEN // 2:
        # a column of few values (words, levels, codes): each distinct cell read once
        codes, uniques = _factorized(text)
        if 2 * len(uniques) <= len(text):
            distinct = parse_numbers(uniques, thousands, decimal).to_numpy()
            return pd.Series(np.where(codes >= 0, distinct[codes], np.nan), index=text.index, dtype="float64")
    text = text.str.replace("\u2212", "-", regex=False)
    if not _ascii(text):
        text = text.str.replace(_DASH_MINUS, "-", regex=True)  # '–5', as typeset text copied writes it
        if text.str.contains(_OTHER_DIGIT, regex=True).any():
            text = text.str.translate(_ascii_digits(decimal))
    separator = _separator(thousands)
    # with a separator: groups of three ('1,234,567'), or the Indian grouping ('12,34,567': two, then three)
    digits = r"\d+" if thousands is None else (rf"[1-9]\d{{0,2}}(?:{separator}\d{{3}})+"
                                               rf"|[1-9]\d?(?:{separator}\d{{2}})+{separator}\d{{3}}|\d+")
    mark = re.escape(decimal)
    pattern = rf"[+-]?(?:(?:{digits})(?:{mark}\d*)?|{mark}\d+)(?:[eE][+-]?\d+)?"
    plain = text.where(text.str.fullmatch(pattern).fillna(False).astype(bool))
    if thousands is not None:
        plain = plain.str.replace(separator, "", regex=True)
    if decimal != ".":
        plain = plain.str.replace(decimal, ".", regex=False)
    values = pd.to_numeric(plain.astype(object), errors="coerce").astype("float64")
    infinite = text.str.fullmatch(_INFINITY, case=False).fillna(False).astype(bool)
    if infinite.any():
        values[infinite] = np.where(text[infinite].str.startswith("-"), -np.inf, np.inf)
    return values


def _plain_floats(text: pd.Series) -> pd.Series | None:
    """``parse_numbers`` of a column every cell of which is a finite number written plainly (no
    thousands separator, '.' as the decimal mark), as one Arrow cast (fast_float, correctly
    rounded like the parser it stands in for: the same float64 values, several times faster);
    None for any other column (a missing cell, a cell Arrow does not read as a number, or one it
    reads as NaN or infinite), which ``parse_numbers`` then reads cell by cell."""
    if text.empty or text.isna().any():
        return None
    try:
        import pyarrow as pa
        import pyarrow.compute as pc

        array = pa.array(text.array)
        if not _first_cells_cast(array):
            return None
        values = pc.cast(array, pa.float64()).to_numpy(zero_copy_only=False)
    except (ImportError, ValueError, TypeError, NotImplementedError):  # pa.ArrowInvalid is a ValueError
        return None
    if not np.isfinite(values).all():
        return None
    return pd.Series(values, index=text.index, dtype="float64")


def _first_cells_cast(array) -> bool:
    """Whether Arrow casts the first 64 cells of ``array`` (strings) to float64: a column of words
    fails there, not after a cast of every cell (20 ms for 50,000 cells)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        pc.cast(array[:64], pa.float64())
        return True
    except (ValueError, TypeError, NotImplementedError):  # pa.ArrowInvalid is a ValueError
        return False


def _ascii(text: pd.Series) -> bool:
    """Whether every cell of ``text`` (strings) is ASCII: one Arrow pass (False when it cannot tell)."""
    import pyarrow.compute as pc

    array = _arrow_strings(text)
    return array is not None and pc.all(pc.string_is_ascii(array)).as_py() is not False


def _arrow_strings(series: pd.Series):
    """The cells of ``series`` as one Arrow string (or large_string) array, without a copy where
    pandas holds them in Arrow (its default "string" storage); None for any other column."""
    import pyarrow as pa

    try:
        array = pa.array(series.array)
    except (TypeError, ValueError, pa.ArrowException):
        return None
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    return array if pa.types.is_string(array.type) or pa.types.is_large_string(array.type) else None


def _zero_padded_text(text: pd.Series) -> np.ndarray:
    """Which cells of ``text`` (a "string" Series) begin as ``_ZERO_PADDED`` does, from the bytes of
    its Arrow array (pandas' default storage), else by the regular expression."""
    import pyarrow.compute as pc

    array = _arrow_strings(text)
    if array is None:
        return text.str.match(_ZERO_PADDED).fillna(False).to_numpy(dtype=bool)
    return _zero_padded_cells(pc.fill_null(array, ""))


def _zero_padded_cells(array) -> np.ndarray:
    """Which cells of an Arrow string array without missing cells begin as ``_ZERO_PADDED`` does:
    '+', '-' or no sign, '0', a digit. Read from the array's bytes, a thirtieth of a regular
    expression's time per cell."""
    import pyarrow as pa

    wide = pa.types.is_large_string(array.type)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64 if wide else np.int32)
    offsets = offsets[array.offset:array.offset + len(array) + 1]
    padded = np.zeros(len(array), dtype=bool)
    rows = np.flatnonzero(np.diff(offsets) >= 2)  # '0' alone, or any one digit, is not padded
    if not len(rows):
        return padded
    data = np.frombuffer(array.buffers()[2], dtype=np.uint8)
    at = offsets[rows].astype(np.int64)
    signed = (data[at] == ord("+")) | (data[at] == ord("-"))
    if signed.any():  # a signed cell needs a third byte ('-05'); '-0' and '-5' are not padded
        keep = ~signed | (offsets[rows + 1] - offsets[rows] >= 3)
        rows, at, signed = rows[keep], at[keep], signed[keep]
        at = at + signed
    digit = data[at + 1]
    padded[rows] = (data[at] == ord("0")) & (digit >= ord("0")) & (digit <= ord("9"))
    return padded


def _plain_number_columns(frame: pd.DataFrame, names: list[str]) -> dict[str, pd.Series]:
    """The columns of ``names`` (a CSV's text columns, none of them forced, read with the default
    thousands and decimal settings) whose cells are, every one, empty (a missing cell) or a number
    Arrow's cast reads as finite, with at least one number, and that hold no digit groups
    ('2.544', ``_grouped_like``) and no number written with leading zeros ('01470',
    ``_zero_padded_cells``): their float64 values (NaN where empty), found for the whole table in
    one cast. ``_infer_column`` reads each such column to the same record and values (its
    ``_plain_floats`` is that cast; a cell with a missing-value word or spaces only, a unit,
    parentheses, a separator or U+2212 fails the cast, and 'nan' or 'inf' is not finite), at a
    few milliseconds of per-column passes each, which is what a table of thousands of columns
    spends its time on; every other column is left to it."""
    if not names or frame.empty:
        return {}
    try:
        import pyarrow as pa
        import pyarrow.compute as pc

        texts = [_arrow_strings(frame[name]) for name in names]
        if any(c is None for c in texts):
            return {}
        kind = texts[0].type
        texts = [c if c.type == kind else c.cast(kind) for c in texts]
        empty = pc.equal(pa.chunked_array(texts, type=kind), "")
        empty = pc.fill_null(empty, False).to_numpy(zero_copy_only=False).reshape(len(names), len(frame))
        columns = list(texts)  # the empty cells as nulls, which the cast reads as missing
        for i in np.flatnonzero(empty.any(axis=1)):
            columns[i] = pc.if_else(pa.array(empty[i]), pa.scalar(None, kind), texts[i])
        tried = [i for i, c in enumerate(columns) if _first_cells_cast(c)]
        try:  # all at once: a table of numbers only
            values = pc.cast(pa.chunked_array([columns[i] for i in tried], type=kind),
                             pa.float64()).to_numpy(zero_copy_only=False)
            read = dict(zip(tried, values.reshape(len(tried), len(frame))))
        except (ValueError, TypeError):  # some column is no such one after its first cells
            read = {}
            for i in tried:
                try:
                    read[i] = pc.cast(columns[i], pa.float64()).to_numpy(zero_copy_only=False)
                except (ValueError, TypeError):
                    pass
        read = {i: v for i, v in read.items() if (np.isfinite(v) | empty[i]).all() and not empty[i].all()}
        for i, v in list(read.items()):  # integers written beyond 2**53, which float64 may make one, are
            with np.errstate(invalid="ignore"):  # left to the rules (``_merged_integers``)
                big = np.flatnonzero(np.abs(v) >= _EXACT)
            if len(big) and frame[names[i]].iloc[big].astype("string").str.strip().str.fullmatch(
                    r"[+-]?[0-9]+").fillna(False).any():
                del read[i]
        if read:
            chosen = list(read)
            dotted = pc.match_substring(pa.chunked_array([texts[i] for i in chosen], type=kind), ".")
            dotted = pc.fill_null(dotted, False).to_numpy(zero_copy_only=False).reshape(len(chosen), len(frame))
            for k, i in enumerate(chosen):
                if (dotted[k].any() and _grouped_like(frame[names[i]].astype("string").str.strip(), ".")
                        or _zero_padded_cells(texts[i]).any()):
                    del read[i]
    except (ImportError, NotImplementedError):
        return {}
    return {names[i]: pd.Series(v, index=frame.index, dtype="float64", copy=False) for i, v in read.items()}


def _quote(counts: dict, limit: int = _SHOWN) -> str:
    shown = ", ".join(f"'{k}' x{v}" for k, v in list(counts.items())[:limit])
    return shown + (f", ... ({len(counts) - limit} more)" if len(counts) > limit else "")


def _rows(index, limit: int = _SHOWN) -> str:
    rows = [int(i) for i in index]
    shown = ", ".join(str(r) for r in rows[:limit])
    return f"row{'s' if len(rows) > 1 else ''} {shown}{', ...' if len(rows) > limit else ''}"


def _as_text(series: pd.Series) -> tuple[pd.Series, dict[str, int], int]:
    """Stripped strings ("string" dtype) with missing cells as NA, the missing-value tokens found
    (token -> cells) and how many cells were Excel's text formula ('="00123"', '="A"', as exports
    that keep leading zeros write cells), read as the text it gives ('00123', 'A')."""
    text, formulas = _unformula(series.astype("string").str.strip())
    marked = text.isin(MISSING_TOKENS).fillna(False).astype(bool)
    if not marked.any():  # most columns: nothing to count or mask
        return text, {}, formulas
    tokens = {str(k): int(v) for k, v in text[marked & (text != "")].value_counts().items()}
    return text.mask(marked), tokens, formulas


def _unformula(text: pd.Series) -> tuple[pd.Series, int]:
    """``text`` (stripped strings) with each cell written as Excel's text formula ('="00123"', '="A"')
    as the text it gives, and how many cells were."""
    if not text.str.startswith('="').any():  # one pass; most columns have none
        return text, 0
    inner = text.str.extract(r'^="(?P<text>(?:[^"]|"")*)"$')["text"]
    found = inner.notna()
    if not found.any():
        return text, 0
    return text.mask(found, inner.str.replace('""', '"', regex=False).str.strip()), int(found.sum())


def _numeric_cells(text: pd.Series, thousands, decimal) -> float:
    present = text.notna()
    return float(parse_numbers(text[present], thousands, decimal).notna().mean()) if present.any() else 0.0


_EXACT = 2 ** 53  # float64 holds every integer up to this exactly, and not every one beyond it


def _factorized(text: pd.Series) -> tuple[np.ndarray, pd.Series]:
    """The code of each cell of ``text`` (-1 for a missing one) and the distinct cells the codes
    index, in the order they first appear ("string" dtype)."""
    codes, uniques = pd.factorize(text)
    return codes, pd.Series(uniques, dtype="string")


def _grouped_like(text: pd.Series, mark: str) -> str | None:
    """A cell of ``text`` that shows the decimal ``mark`` may be a thousands separator, or None:
    every cell with the mark is digit groups of three after a leading 1-3 digits ('2.544',
    '1.083.000', not '0.125') and some numbers have no mark at all ('653')."""
    written = text.dropna()
    marked = written[written.str.contains(mark, regex=False)]
    if marked.empty:
        return None
    groups = rf"[+-]?[1-9]\d{{0,2}}(?:{re.escape(mark)}\d{{3}})+"
    if not re.fullmatch(groups, str(marked.iloc[0])):  # cheap: '0.125' ends it before a pass over the column
        return None
    if not marked.str.fullmatch(groups).all() or not written.str.fullmatch(r"[+-]?\d+").any():
        return None
    return str(marked.iloc[0])
