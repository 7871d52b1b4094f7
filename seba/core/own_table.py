"""Your own table: a user's CSV / TSV / parquet / Excel / ARFF file (``sources.<name>.path``) read
into the raw table format (``seba.core.raw``), every column's type inferred by fixed rules that
are reported column by column (docs/own-table.md), so that nothing is lost without a word: the
file's format and encoding, its header, the notations its numbers, dates and times are written
in, missing-value marks, spreadsheet errors, codes, ids, repeated rows and the target's classes.
``load_local_table`` is the entry point; ``parse_numbers`` reads a column of numbers as written.
"""

from __future__ import annotations

import bz2
import codecs
import csv
import datetime
import difflib
import functools
import gzip
import io
import json
import lzma
import os
import re
import unicodedata
import warnings
import zipfile
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from seba.core.config import DELIMITERS, INVISIBLE, SPACES, bare, column_name, csv_delimiter, local_format
from seba.core.errors import DataError
from seba.core.raw import FEATURES_NEEDED, FLOAT32_MAX, LABEL, SCHEMA_ATTR, sha256_file
from seba.core.runtime import lazy_module, log

pd = lazy_module("pandas")


# What a spreadsheet shows in a cell whose formula failed, and a CSV it saves holds: Excel's and
# Google Sheets' errors ('#N/A', also a missing mark of pandas, is in MISSING_TOKENS) and
# LibreOffice's 'Err:5xx' codes. The formula's value is unknown, so the cell is missing.
SPREADSHEET_ERRORS = frozenset({"#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NUM!", "#NULL!", "#SPILL!", "#CALC!",
                                "#FIELD!", "#BLOCKED!", "#CONNECT!", "#BUSY!", "#UNKNOWN!", "#PYTHON!",
                                "#GETTING_DATA", "#ERROR!", *(f"Err:{code}" for code in range(501, 541))})
# Cells read as missing in every column of a local table: the tokens pandas reads as missing by
# default, "?" (the UCI / OpenML mark) and the spreadsheet errors. Matched after stripping spaces,
# case-sensitive.
MISSING_TOKENS = frozenset({"", "?", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
                            "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan",
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


def _check_inside_repository(root: Path, relative: str, where: str, key: str) -> None:
    """Refuse a path that leaves the repository through a symlink (the file or any folder on
    its way): DVC tracks only files inside the repository, so a run would not be reproducible."""
    top = root.resolve()
    current = root
    for part in Path(relative).parts:
        current = current / part
        if current.is_symlink():
            target = current.resolve()
            if not target.is_relative_to(top):
                raise DataError(f"{where}: '{key}' goes through the symlink {current.relative_to(root)} -> "
                                f"{os.readlink(current)}, which leaves the repository ({target}); DVC tracks "
                                f"only files inside it: copy the file into data/local/ instead of linking it")


def _duplicates(names: list[str]) -> dict[str, list[int]]:
    positions: dict[str, list[int]] = {}
    for i, column in enumerate(names, start=1):
        positions.setdefault(column, []).append(i)
    return {c: p for c, p in positions.items() if len(p) > 1}


def _refuse_duplicates(names: list[str], where: str) -> None:
    dup = _duplicates(names)
    if dup:
        listed = "; ".join(f"'{c}' (columns {', '.join(map(str, p))})" for c, p in dup.items())
        raise DataError(f"{where}: duplicate column names: {listed}; give every column its own name")


def _check_parquet_schema(path: Path, where: str):
    """Named errors for what a feature cannot be: duplicate names, lists / structs / maps per cell;
    the file's schema when it has neither."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    _refuse_duplicates([str(n).strip() for n in schema.names], where)
    nested = [f"'{f.name}' ({f.type})" for f in schema if pa.types.is_nested(f.type)]
    if nested:
        raise DataError(f"{where}: column(s) {', '.join(nested)} hold a list, struct or map in each cell; a "
                        f"feature needs one value per cell: expand them into columns (one per element or "
                        f"field) or remove them")
    return schema


def _categorical_as_written(frame: pd.DataFrame, schema) -> pd.DataFrame:
    """A parquet file's columns that pandas wrote from a categorical of numbers (its metadata says
    'categorical'), which parquet stores as plain numbers and reads back so, as categorical again:
    the type its writer gave them (a categorical of text comes back as one by itself). ``schema``:
    the file's parquet schema."""
    try:
        written = json.loads((schema.metadata or {}).get(b"pandas", b"{}"))
    except (ValueError, TypeError):
        return frame
    declared = {str(c.get("name")) for c in written.get("columns", []) if isinstance(c, dict)
                and c.get("pandas_type") == "categorical"}
    for column in frame.columns:
        if column in declared and not isinstance(frame[column].dtype, pd.CategoricalDtype):
            frame[column] = frame[column].astype("category")
    return frame


def _csv_stream(path: Path, where: str = ""):
    """A binary stream of a CSV's bytes, decompressed by the name's ending (``.csv.gz``, ``.bz2``,
    ``.xz``, ``.zip``: the archive's one file; the ``__MACOSX/`` entries that macOS adds are not
    counted)."""
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rb")
    if name.endswith(".bz2"):
        return bz2.open(path, "rb")
    if name.endswith(".xz"):
        return lzma.open(path, "rb")
    if name.endswith(".zip"):
        archive = zipfile.ZipFile(path)
        files = [n for n in archive.namelist() if not n.endswith("/") and not n.startswith("__MACOSX/")]
        if len(files) != 1:
            archive.close()
            raise DataError(f"{where}: the archive holds {len(files)} files ({', '.join(files[:5]) or 'none'}); "
                            f"a .csv.zip holds one CSV file")
        return archive.open(files[0])
    return open(path, "rb")


def _csv_bytes(path: Path) -> bytes:
    with _csv_stream(path) as fh:
        return fh.read()


def _read_csv(path: Path, where: str, **read) -> pd.DataFrame:
    with _csv_stream(path, where) as fh:
        return pd.read_csv(fh, **read)


def _text_encoding(encoding: str) -> str:
    """The codec a CSV is opened with: UTF-8 reads a byte-order mark as no character."""
    return "utf-8-sig" if codecs.lookup(encoding).name == "utf-8" else encoding


def _read_excel(path: Path, where: str, key: str, sheet: str | int | None, tag: str = "fetch",
                top: int = 1) -> pd.DataFrame:
    """One sheet of an Excel workbook (the first unless ``sheet`` names another, by name or by
    position from 0), its row ``top`` the header (the rows above it left out), each column with the type of its cells (numbers,
    dates, booleans; a column of mixed cells, or of text cells, is text, digits written as text
    included). Needs openpyxl."""
    try:
        import openpyxl  # noqa: F401  (pandas' reader of .xlsx files)
    except ImportError:
        raise DataError(f"{where}: reading an Excel file needs the openpyxl package: pip install -e \".[excel]\" "
                        f"(or pip install openpyxl), or save the sheet as CSV") from None
    try:
        return _excel_sheet(path, where, key, sheet, tag, top)
    except DataError:
        raise
    except Exception as exc:  # openpyxl's own errors on a file that is not a workbook, or a damaged one
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{where}: cannot be read as an Excel workbook: {first}") from None


def _excel_sheet(path: Path, where: str, key: str, sheet: str | int | None, tag: str = "fetch",
                 top: int = 1) -> pd.DataFrame:
    """The chosen sheet of the workbook (see ``_read_excel``), with the header as written."""
    with pd.ExcelFile(path, engine="openpyxl") as book:
        names = [str(n) for n in book.sheet_names]
        listed = ", ".join(f"'{n}'" for n in names)
        if sheet is None:
            chosen = names[0]
            if len(names) > 1:
                log(f"[{tag}] {where}: read its first sheet '{chosen}' of {len(names)} ({listed}); set "
                    f"'{key}.sheet' to read another")
        elif isinstance(sheet, int):
            if not 0 <= sheet < len(names):
                named = f" (the sheet named '{sheet}'? quote it: sheet: '{sheet}')" if str(sheet) in names else ""
                raise DataError(f"{where}: '{key}.sheet' is {sheet}, but the workbook has {len(names)} sheet(s) "
                                f"({listed}), counted from 0{named}")
            chosen = names[sheet]
        elif sheet not in names:
            close = [n for n in names if n.strip().lower() == sheet.strip().lower()]
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise DataError(f"{where}: no sheet '{sheet}' in the workbook{hint}; its sheets: {listed}")
        else:
            chosen = sheet
        # each cell as the workbook holds it, an empty one missing: pandas' defaults read text cells
        # of digits as numbers ('01470', a zip code written as text, became 1470 before any rule saw
        # it, even with the column in `categorical`) and text cells such as 'NA' or 'n/a' as missing
        # without a count; the types then come from the cells' own (numbers, dates, booleans)
        frame = pd.read_excel(book, sheet_name=chosen, dtype=object, keep_default_na=False,
                              na_values=[""], skiprows=top - 1).infer_objects()
        # the names as written (pandas renames a repeated name 'a' to 'a.1')
        header = pd.read_excel(book, sheet_name=chosen, header=None, nrows=1, skiprows=top - 1)
    if len(header) and header.shape[1] == frame.shape[1]:
        frame.columns = [str(h).strip() if pd.notna(h) and str(h).strip() else f"Unnamed: {i}"
                         for i, h in enumerate(header.iloc[0])]
    if top > 1:
        log(f"[{tag}] {where}: the column names read from row {top} ('{key}.header_row'), the {top - 1} row(s) "
            f"above it left out")
    ranges, error_cells, formula_cells = _sheet_marks(path, chosen)
    errors, uncomputed = _sheet_errors(frame, error_cells, formula_cells, top)  # before merged ranges are filled
    frame = _merged_filled(frame, ranges, where, tag, top)
    if errors:
        frame.attrs[SHEET_ERRORS] = errors
    if uncomputed:
        frame.attrs[SHEET_UNCOMPUTED] = uncomputed
    empty = [i for i in range(frame.shape[1]) if frame.iloc[:, i].isna().all()]
    if len(frame) and empty:
        _refuse_formulas_without_values(path, where, chosen, empty, list(frame.columns), top)
    return frame


_SHEET_NS = {"m": "http://schemas.openxmlformats.org/spreadsheetml/2006/main",
             "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships"}
_MERGED = re.compile(rb'<(?:\w+:)?mergeCell\s+ref="([A-Z]+)(\d+):([A-Z]+)(\d+)"')
# a cell of type "e" (a formula's error, its text in <v>): '<c r="B7" t="e"><f>1/0</f><v>#DIV/0!</v></c>'
_CELL_START = re.compile(rb'<(?:\w+:)?c\s')
_CELL_REF = re.compile(rb'\br="([A-Z]+)(\d+)"')
_CELL_VALUE = re.compile(rb'<(?:\w+:)?v>([^<]*)</')
_CELL_END = re.compile(rb'</(?:\w+:)?c>')
# a cell holding a formula and no value, as a program that does not compute formulas writes it:
# no <v>, or openpyxl's '<v />' (a computed empty text, which Excel writes '<v></v>', is a value)
_UNCOMPUTED = re.compile(rb'<(?:\w+:)?c\s([^>]*)>\s*<(?:\w+:)?f\b(?:[^>]*/>|[^>]*>[^<]*</(?:\w+:)?f>)\s*'
                         rb'(?:<(?:\w+:)?v\s*/>\s*)?</(?:\w+:)?c>')
SHEET_ERRORS = "seba_sheet_errors"  # frame.attrs key: a sheet's error cells per column position
SHEET_UNCOMPUTED = "seba_sheet_uncomputed"  # ... and its formulas without a stored value


def _sheet_marks(path: Path, sheet: str) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, int, str]],
                                                 list[tuple[int, int]]]:
    """A workbook sheet's merged cell ranges, as (first row, first column, last row, last column),
    its cells holding a formula's error, as (row, column, error text), and those holding a formula
    without a stored value, as (row, column), counted from 1 as Excel counts them: read from the
    sheet's XML, streamed (openpyxl's read-only mode, which pandas uses, does not give the ranges,
    and pandas reads both kinds of cell as empty ones)."""
    import xml.etree.ElementTree as ET
    from xml.sax.saxutils import unescape

    from openpyxl.utils import column_index_from_string as column

    try:
        with zipfile.ZipFile(path) as archive:
            book = ET.fromstring(archive.read("xl/workbook.xml"))
            rid = next(s.get(f"{{{_SHEET_NS['r']}}}id") for s in book.iter(f"{{{_SHEET_NS['m']}}}sheet")
                       if s.get("name") == sheet)
            relations = ET.fromstring(archive.read("xl/_rels/workbook.xml.rels"))
            target = next(r.get("Target") for r in relations if r.get("Id") == rid)
            part = target.lstrip("/") if target.startswith("/") else f"xl/{target}"
            merged, errors, uncomputed, tail = [], [], [], b""

            def scan(text: bytes) -> None:
                merged.extend(_MERGED.findall(text))
                at = text.find(b't="e"')  # most sheets have no error cell
                while at >= 0:  # each one's start tag, reference and value around the attribute
                    start, close = text.rfind(b"<", 0, at), text.find(b">", at)
                    ref = _CELL_REF.search(text, start, close)
                    end = _CELL_END.search(text, close)
                    value = _CELL_VALUE.search(text, close, end.start() + 4) if end else None
                    if _CELL_START.match(text, start) and ref and value and text[close - 1] != ord("/"):
                        errors.append((int(ref.group(2)), column(ref.group(1).decode()),
                                       unescape(value.group(1).decode("utf-8", "replace")).strip()))
                    at = text.find(b't="e"', max(close, at + 1))
                if b"<f" in text or b":f" in text:  # a sheet of formulas: those stored without a value
                    for attributes in _UNCOMPUTED.findall(text):
                        ref = _CELL_REF.search(attributes)
                        if ref:
                            uncomputed.append((int(ref.group(2)), column(ref.group(1).decode())))

            with archive.open(part) as fh:
                while chunk := fh.read(1 << 20):
                    text = tail + chunk
                    cut = text.rfind(b"row>")  # whole rows at a time (a cell cut at the chunk's end is read with the next)
                    cut = text.rfind(b">") if cut < 0 and len(text) > 1 << 24 else cut  # (no rows: ranges only)
                    scan(text[:cut + 1] if cut >= 0 else b"")
                    tail = text[cut + 1:] if cut >= 0 else text
            scan(tail)
    except (KeyError, StopIteration, ET.ParseError, zipfile.BadZipFile, OSError):
        return [], [], []
    ranges = [(int(r1), column(c1.decode()), int(r2), column(c2.decode())) for c1, r1, c2, r2 in merged]
    return ranges, errors, uncomputed


def _sheet_errors(frame: pd.DataFrame, errors: list[tuple[int, int, str]],
                  uncomputed: list[tuple[int, int]], top: int = 1) -> tuple[dict, dict]:
    """The error cells and the formulas without a value (``_sheet_marks``) among ``frame``'s data
    cells (a sheet read with its header in row ``top``) that it reads as missing, per column position:
    error text -> cells, and (cells, the first one's reference, 'B7')."""
    from collections import Counter

    from openpyxl.utils import get_column_letter

    missing = frame.isna().to_numpy() if errors or uncomputed else None

    def read_missing(cells: list[tuple]) -> list[tuple]:
        return [c for c in cells if 0 <= c[0] - top - 1 < len(frame) and c[1] - 1 < frame.shape[1]
                and missing[c[0] - top - 1, c[1] - 1]]

    counted: dict[int, dict[str, int]] = {}
    for (k, text), cells in Counter((col - 1, text) for _, col, text in read_missing(errors)).items():
        counted.setdefault(k, {})[text] = cells
    found: dict[int, tuple[int, str]] = {}
    for row, col in read_missing(uncomputed):
        n, first = found.get(col - 1, (0, f"{get_column_letter(col)}{row}"))
        found[col - 1] = (n + 1, first)
    return counted, found


def _merged_filled(frame: pd.DataFrame, ranges: list[tuple[int, int, int, int]], where: str,
                   tag: str = "fetch", top: int = 1) -> pd.DataFrame:
    """``frame`` (a sheet read with its header in row ``top``) with each merged range of data cells
    holding its first cell's value in every cell, as the sheet shows it (openpyxl reads the value
    in the first cell only and the others empty), and a notice naming the ranges; ranges in the
    header row are left alone."""
    from openpyxl.utils import get_column_letter

    fills, shown, counts = [], [], {}
    for r1, c1, r2, c2 in sorted(ranges):
        if r1 < top + 1 or c1 > frame.shape[1] or r1 - top - 1 >= len(frame):
            continue
        value = frame.iat[r1 - top - 1, c1 - 1]
        if pd.isna(value):
            continue
        rows = np.arange(r1 - top - 1, min(r2 - top, len(frame)))
        for k in range(c1 - 1, min(c2, frame.shape[1])):
            empty = rows[frame.iloc[rows, k].isna().to_numpy()]
            if len(empty):
                fills.append((k, empty, value))
                counts[frame.columns[k]] = counts.get(frame.columns[k], 0) + len(empty)
        shown.append(f"{get_column_letter(c1)}{r1}:{get_column_letter(c2)}{r2}")
    if not fills:
        return frame
    frame = frame.copy()
    for k in {k for k, _, _ in fills}:
        frame.isetitem(k, frame.iloc[:, k].astype(object))  # any value fits; the types are inferred again below
    for k, empty, value in fills:
        frame.iloc[empty, k] = value
    cells = ", ".join(f"'{name}' {n}" for name, n in counts.items())
    log(f"[{tag}] {where}: {len(shown)} merged range(s) of cells ({', '.join(shown[:_SHOWN])}"
        f"{', ...' if len(shown) > _SHOWN else ''}) read as their first cell's value in each cell, as the sheet "
        f"shows them (cells so filled: {cells})")
    return frame.infer_objects()


_FORMULA_ROWS = 10  # the first data rows of an empty column of a sheet looked at for formulas


def _refuse_formulas_without_values(path: Path, where: str, sheet: str, empty: list[int], names: list[str],
                                    top: int = 1) -> None:
    """An error naming the columns of a sheet (positions ``empty``, every cell read missing) whose
    first data rows hold formulas: a workbook stores a formula's value only when a spreadsheet
    application computed it, so one written by a program (openpyxl, pandas) and never opened
    in one reads as empty cells, and the column would be dropped as all missing."""
    import openpyxl

    book = openpyxl.load_workbook(path, read_only=True, data_only=False)
    try:
        rows = list(book[sheet].iter_rows(min_row=top, max_row=top + _FORMULA_ROWS, values_only=True))
    finally:
        book.close()
    found = []
    for i in empty:
        for row, cells in enumerate(rows[1:], start=top + 1):
            cell = cells[i] if i < len(cells) else None
            if isinstance(cell, str) and cell.startswith("=") or "Formula" in type(cell).__name__:
                found.append(f"'{names[i]}' ({getattr(cell, 'text', cell)!s} in row {row})")
                break
    if found:
        raise DataError(f"{where}: column(s) {', '.join(found)} hold formulas whose values the workbook does not "
                        f"store, so every cell reads as empty: a file written by a program and never opened in a "
                        f"spreadsheet application is so; open and save it in Excel or LibreOffice, which computes "
                        f"and stores the values, or write the values into the sheet")


# an ARFF attribute of type DATE (which liac-arff does not read): read as STRING, its cells then
# follow the text rules (ISO dates become days)
_ARFF_DATE = re.compile(r"^(\s*@attribute\s+(?:'[^']*'|\"[^\"]*\"|\S+)\s+)date\b.*$", re.IGNORECASE | re.MULTILINE)


def _read_arff(path: Path, where: str, encoding: str = "utf-8") -> pd.DataFrame:
    """An ARFF file (OpenML's and Weka's format, dense or sparse; liac-arff, which openml
    installs): NUMERIC / REAL / INTEGER attributes as numbers, nominal ones as categoricals with
    their declared levels (the rules then keep those that occur), STRING and DATE ones as text."""
    import arff

    text = path.read_text(encoding=_text_encoding(encoding))  # data lines never start with '@attribute'
    try:
        parsed = arff.loads(_ARFF_DATE.sub(r"\1string", text), return_type=arff.DENSE)
    except arff.ArffException as exc:
        raise DataError(f"{where}: cannot be read as ARFF: {exc}") from None
    columns = {}
    for i, (name, kind) in enumerate(parsed["attributes"]):
        cells = [row[i] for row in parsed["data"]]
        if isinstance(kind, list):
            columns[name] = pd.Categorical(cells, categories=list(dict.fromkeys(kind)))
        elif str(kind).upper() in ("NUMERIC", "REAL", "INTEGER"):
            columns[name] = pd.array([np.nan if c is None else c for c in cells], dtype="float64")
        else:
            columns[name] = pd.Series(cells, dtype=object)
    return pd.DataFrame(columns)


def _read_local(path: Path, where: str, key: str = "the source", delimiter: str = ",",
                encoding: str = "utf-8", sheet: str | int | None = None, tag: str = "fetch",
                target: str | None = None, top: int = 1) -> pd.DataFrame:
    """The file as it is: a CSV (fields separated by ``delimiter``, text in ``encoding``) as text
    (every cell a string, nothing converted), a parquet file with its own column types, a sheet
    of an Excel workbook with the types pandas infers, an ARFF file with its attributes' types; a
    CSV's or sheet's column names on its line or row ``top`` (``header_row``), those above left out."""
    kind = local_format(path)
    kind = "csv" if kind == "tsv" else kind  # a TSV is a CSV with its own delimiter
    opened = _text_encoding(encoding)
    skip = _declared_delimiter_line(path, where, key, delimiter, opened, tag) if kind == "csv" and top == 1 else 0
    if kind == "csv" and top > 1:
        skip = top - 1
        log(f"[{tag}] {where}: the column names read from line {top} ('{key}.header_row'), the {top - 1} "
            f"line(s) above it left out")
    try:
        if kind == "csv":
            read = dict(sep=delimiter, encoding=opened, dtype=str, keep_default_na=False, na_filter=False,
                        low_memory=False, skiprows=skip)
            frame = _read_csv(path, where, **read)
            if not isinstance(frame.index, pd.RangeIndex):
                # data rows with one field more than the header: pandas would take the first column
                # for a row index and shift every name by one column
                frame = _without_trailing_field(frame, path, read, where, _csv_hint(path, target, delimiter, key,
                                                                                     opened), tag)
            with io.TextIOWrapper(_csv_stream(path), encoding=opened, newline="") as fh:  # the header as
                records = csv.reader(fh, delimiter=delimiter)  # written (pandas renames 'a', 'a.1')
                header = [next(records, None) for _ in range(skip + 1)][-1]
            if header is not None and len(header) == frame.shape[1]:
                frame.columns = [h.strip() or f"Unnamed: {i}" for i, h in enumerate(header)]
                _warn_short_rows(frame, path, delimiter, opened, where, tag, skip)
                frame = _without_header_rows(frame, [column_name(h) for h in header], where, tag)
        elif kind == "excel":
            frame = _read_excel(path, where, key, sheet, tag, top)
        elif kind == "arff":
            frame = _read_arff(path, where, encoding)
        else:
            schema = _check_parquet_schema(path, where)
            frame = _categorical_as_written(_index_as_columns(pd.read_parquet(path), where, tag), schema)
    except UnicodeError as exc:  # a UnicodeDecodeError; UTF-16 without a byte-order mark raises its base
        raise DataError(_not_encoded(path, where, key, encoding, exc)) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, OSError, EOFError, csv.Error,
            zipfile.BadZipFile, lzma.LZMAError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = _csv_hint(path, target, delimiter, key, opened) if kind == "csv" else ""
        raise DataError(f"{where}: cannot be read as {kind}: {first}{hint}") from None
    frame.columns = [column_name(str(c)) or f"Unnamed: {i}" for i, c in enumerate(frame.columns)]  # as a CSV's
    _refuse_duplicates(list(frame.columns), where)
    for column in frame.columns:
        if frame[column].dtype == object:
            sample = frame[column].dropna()
            if len(sample) and isinstance(sample.iloc[0], (list, tuple, dict, np.ndarray)):
                raise DataError(f"{where}: column '{column}' holds a list or mapping in each cell; a feature "
                                f"needs one value per cell: expand it into columns or remove it")
    return frame


_SEP_LINE = re.compile(r"sep=(.)(?:\r\n|\n|\r)?", re.IGNORECASE)  # Excel's first line naming the field separator


def _declared_delimiter_line(path: Path, where: str, key: str, delimiter: str, opened: str,
                             tag: str = "fetch") -> int:
    """1 when a CSV's first line is Excel's ``sep=;`` (the field separator it is written with,
    which Excel reads and some exports write above the column names), with a notice; 0 when it
    is not. A line naming another separator than ``delimiter`` is an error naming the setting:
    read with the wrong one, the line became the column names and every row one field."""
    try:
        with io.TextIOWrapper(_csv_stream(path), encoding=opened, newline="") as fh:
            line = fh.readline(16)
    except (OSError, EOFError, UnicodeError, DataError, zipfile.BadZipFile, lzma.LZMAError):
        return 0  # read (and named) with the rest of the file
    found = _SEP_LINE.fullmatch(line)
    if not found:
        return 0
    declared = found.group(1)
    line = 'sep=\\t' if declared == '\t' else f'sep={declared}'  # as the messages show it
    if declared not in DELIMITERS:
        raise DataError(f"{where}: the first line, '{line}', says (as Excel reads it) that the fields are "
                        f"separated by {declared!r}, which is not a delimiter this reader takes "
                        f"({', '.join(repr(c) for c in DELIMITERS)}): save the file with one of them")
    if declared != delimiter:
        raise DataError(f"{where}: the first line, '{line}', says (as Excel reads it) that the fields are "
                        f"separated by {declared!r}, not {delimiter!r}: set delimiter: {_as_yaml(declared)} in "
                        f"'{key}'")
    log(f"[{tag}] {where}: the first line, '{line}', names the field separator (as Excel writes it); "
        f"the column names are read from the line below it")
    return 1


def _not_encoded(path: Path, where: str, key: str, encoding: str, exc: UnicodeError) -> str:
    """The error for a CSV or ARFF file that is not text in ``encoding``: where it stops being so
    ('invalid start byte 0xe9 at byte 91, line 4'; pandas reports positions within its read
    buffer, not the file), and the encoding it likely is: UTF-16 for a file starting with its byte-order mark;
    Windows-1252 (as Excel writes CSV on Western European Windows) for a file that is text in it,
    with what the byte is there."""
    data = _csv_bytes(path)
    where_bad, byte = getattr(exc, "reason", str(exc)), b""
    try:
        data.decode(encoding)
    except UnicodeDecodeError as bad:
        line = data.count(b"\n", 0, bad.start) + 1
        where_bad = f"{bad.reason} 0x{data[bad.start]:02x} at byte {bad.start}, line {line}"
        byte = data[bad.start:bad.start + 1]
    except UnicodeError as bad:
        where_bad = str(bad)
    name = codecs.lookup(encoding).name
    guess = ""
    if data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE) and not name.startswith("utf-16"):
        guess = " (it starts with a UTF-16 byte-order mark, as Excel's 'Unicode Text' writes: set encoding: utf-16)"
    elif name != "cp1252":
        try:
            data.decode("cp1252")
            shown = f", where 0x{byte[0]:02x} is {byte.decode('cp1252')!r}" if byte and byte[0] >= 0x80 else ""
            guess = (f" (it reads as Windows-1252, as Excel writes CSV on Western European Windows{shown}: set "
                     f"encoding: cp1252)")
        except UnicodeDecodeError:
            pass
    if name == "utf-8":
        return (f"{where}: not UTF-8 text ({where_bad}); save the file as UTF-8, or set encoding in '{key}' to "
                f"the one it is written in{guess}")
    return f"{where}: not {encoding} text ({where_bad}); set encoding in '{key}' to the one it is written in{guess}"


def _other_delimiter(path: Path, delimiter: str, opened: str = "utf-8-sig") -> str | None:
    """The field separator that a CSV's header line uses when it is not ``delimiter`` (the header
    is one field under ``delimiter`` and several under the other), or None."""
    try:
        with io.TextIOWrapper(_csv_stream(path), encoding=opened, newline="") as fh:
            line = fh.readline()
    except (OSError, EOFError, UnicodeError, DataError, zipfile.BadZipFile, lzma.LZMAError):
        return None
    fields = lambda sep: next(csv.reader([line], delimiter=sep), [])
    if len(fields(delimiter)) > 1:
        return None
    return next((sep for sep in DELIMITERS if sep != delimiter and len(fields(sep)) > 1), None)


def _as_yaml(delimiter: str) -> str:
    """A delimiter as params.yaml takes it: quoted, a tab only in double quotes ('"\\t"')."""
    return '"\\t"' if delimiter == "\t" else repr(delimiter)


def _delimiter_hint(path: Path, delimiter: str, key: str, opened: str = "utf-8-sig") -> str:
    """' (the file separates its fields with ';', not ',': set delimiter: ';' in 'sources.mine')', or ''."""
    other = _other_delimiter(path, delimiter, opened)
    return (f" (the file separates its fields with {other!r}, not {delimiter!r}: set delimiter: {_as_yaml(other)} "
            f"in '{key}')") if other else ""


def _without_trailing_field(frame: pd.DataFrame, path: Path, read: dict, where: str, hint: str = "",
                            tag: str = "fetch") -> pd.DataFrame:
    """A CSV whose data rows have one field more than its header (read by pandas with the first
    field as a row index): a trailing delimiter on every row (the extra fields all empty) is read
    without it; data in the extra fields is an error, not a silent shift of the names."""
    more = frame.index.nlevels
    extra = frame.iloc[:, -1] if frame.shape[1] else pd.Series([""] * len(frame))
    filled = np.flatnonzero(extra.str.strip().ne("").to_numpy())
    if more > 1 or len(filled):
        raise DataError(f"{where}: the data rows have {'one field' if more == 1 else f'{more} fields'} more than the header "
                        f"({frame.shape[1]} names)" + ("" if more > 1 else f", and the last one holds values "
                                                        f"(data {_rows(filled + 1)})")
                        + (hint if hint else
                           ": a column has no name (a first column of row names, as R's write.table writes "
                           "them, or a last one); give every column a name in the first line (an unnamed "
                           "first column is dropped if it is a row index)"))
    log(f"[{tag}] {where}: every data row ends in a delimiter after its last field; read without it")
    with warnings.catch_warnings():  # pandas warns that the (empty) last fields are left out
        warnings.simplefilter("ignore", pd.errors.ParserWarning)
        return _read_csv(path, where, index_col=False, **read)


def _names_below(path: Path, target: str, delimiter: str = ",", opened: str = "utf-8-sig",
                 sheet: str | int | None = None, key: str = "the source") -> str:
    """Where a CSV's or a sheet's column names are when lines above them (a title, notes) come
    first: the text that says so and what to do, when one of the first 30 lines below the first
    has a cell that is the target's name; '' otherwise."""
    excel = local_format(path) == "excel"
    try:
        if excel:
            lines = _top_cells(path, 0 if sheet is None else sheet)
        else:
            with io.TextIOWrapper(_csv_stream(path), encoding=opened, newline="") as fh:
                records = csv.reader(fh, delimiter=delimiter)
                lines = [next(records, []) for _ in range(30)]
    except (ValueError, OSError, EOFError, UnicodeError, csv.Error, zipfile.BadZipFile, lzma.LZMAError, KeyError):
        return ""
    found = next((k for k, cells in enumerate(lines) if k and target.strip() in [c.strip() for c in cells]), None)
    if found is None:
        return ""
    place = f"row {found + 1} of the sheet" if excel else f"line {found + 1} of the file"
    unit = "row" if excel else "line"
    above = f"the {found} {unit}s" if found > 1 else f"the {unit}"
    return (f"the column names, with '{target.strip()}', are on {place}, below a title or notes: set "
            f"header_row: {found + 1} in '{key}' (or delete {above} above them)")


def _top_cells(book, sheet: str | int, rows: int = 30) -> list[list[str]]:
    """The non-empty cells of a sheet's first ``rows`` rows, as text, row by row (``book``: a
    workbook's path or an open ``pd.ExcelFile``)."""
    top = pd.read_excel(book, sheet_name=sheet, header=None, nrows=rows, engine="openpyxl")
    return [[str(v) for v in row if pd.notna(v)] for row in top.itertuples(index=False)]


def _sheet_with(path: Path, target: str, sheet: str | int | None, key: str) -> str:
    """Which other sheet of a workbook has a cell that is the target's name in its first 30 rows
    (a workbook whose first sheet is notes or a summary), as the text that says which ``sheet``
    to set; '' when none has."""
    try:
        with pd.ExcelFile(path, engine="openpyxl") as book:
            names = [str(n) for n in book.sheet_names]
            read = names[0] if sheet is None else names[sheet] if isinstance(sheet, int) else sheet
            for name in names:
                if name == read:
                    continue
                for row, cells in enumerate(_top_cells(book, name)):
                    if target.strip() in [c.strip() for c in cells]:
                        return (f"the sheet '{name}' has it, on row {row + 1}: set sheet: '{name}'"
                                + ("" if row == 0 else f" and header_row: {row + 1}") + f" in '{key}'")
    except (ValueError, OSError, KeyError, IndexError, zipfile.BadZipFile):
        return ""
    return ""


def _csv_hint(path: Path, target: str | None, delimiter: str, key: str, opened: str) -> str:
    """What a CSV whose rows do not fit its header most likely needs: the lines above its column
    names deleted (``_names_below``), or another delimiter."""
    below = _names_below(path, target, delimiter, opened, key=key) if target else ""
    return f": {below}" if below else _delimiter_hint(path, delimiter, key, opened)


def _without_header_rows(frame: pd.DataFrame, names: list[str], where: str, tag: str = "fetch") -> pd.DataFrame:
    """A CSV's data rows that repeat its header (``names``, stripped, as written), as files joined
    with their headers have, dropped with a notice (they hold no data); a data row of the column
    names in another order, which means the joined files' columns are in different orders, is an
    error naming it."""
    if len(frame) == 0 or len(names) < 2 or len(set(names)) < len(names):  # duplicates: refused next
        return frame
    first = frame.iloc[:, 0].str.strip().str.strip(INVISIBLE).str.strip()  # as the names are read (``bare``)
    named = np.flatnonzero(first.isin(set(names)).to_numpy())
    if not len(named):
        return frame
    rows = frame.iloc[named].apply(lambda column: column.map(column_name))
    same = (rows.to_numpy() == np.array(names, dtype=object)).all(axis=1)
    reordered = ~same & np.array([sorted(r) == sorted(names) for r in rows.itertuples(index=False)])
    if reordered.any():
        at = named[reordered]
        raise DataError(f"{where}: data {_rows(at + 1)} {'hold' if len(at) > 1 else 'holds'} the column names "
                        f"in another order "
                        f"({', '.join(rows.iloc[np.flatnonzero(reordered)[0]].tolist()[:6])}"
                        f"{', ...' if len(names) > 6 else ''}), as a file joined from tables with different "
                        f"column orders does: the rows after such a line would be read into the wrong columns; "
                        f"write every part in the header's order")
    if not same.any():
        return frame
    log(f"[{tag}] {where}: data {_rows(named[same] + 1)} {'repeat' if same.sum() > 1 else 'repeats'} the header "
        f"line (files joined with their headers); dropped")
    return frame.drop(index=frame.index[named[same]]).reset_index(drop=True)


_LEADING_ROWS = 3  # data rows at the top of a CSV or sheet checked for a second header line
_BELOW_SAMPLE = 200  # the rows below them that say which columns hold numbers


def _without_second_header(frame: pd.DataFrame, source, excel: bool = False) -> tuple[pd.DataFrame, str | None]:
    """A CSV's or sheet's first data rows that are a second header (units, longer names: `years,
    cm, kg`) dropped, and the notice saying so (None when there is none). A row is one when none
    of its feature cells is a number, at least two of its cells are words above columns of
    numbers (``NUMERIC_SHARE`` of the cells of the next ``_BELOW_SAMPLE`` rows), and its target
    cell is missing or a value no other row has: such a row could not be used anyway (a class of
    one row stops the split, a row without a target is dropped). Read as data, it gave every
    numeric column a warning for a missing cell and the target a class of one row, and kept the
    table out of the whole-table pass. A sheet's columns get the types pandas infers without it."""
    if len(frame) <= _LEADING_ROWS + 5:
        return frame, None
    features = [c for c in frame.columns if c != source.target and c not in source.categorical]
    below = frame.iloc[_LEADING_ROWS:_LEADING_ROWS + _BELOW_SAMPLE]
    numeric: dict[str, bool] = {}  # column -> whether the cells below the leading rows are numbers
    target = counts = None  # the target's cells, read once a row has no number

    def of_numbers(column: str) -> bool:
        if column not in numeric:
            cells = _as_text(below[column].astype(object))[0]
            numeric[column] = column in source.numeric or bool(
                cells.notna().any() and _numeric_cells(cells, source.thousands, source.decimal) >= NUMERIC_SHARE)
        return numeric[column]

    leading, shown = 0, []
    for row in range(_LEADING_ROWS):
        cells = _as_text(frame.iloc[row][features].astype(object))[0].reset_index(drop=True)
        if parse_numbers(cells, source.thousands, source.decimal).notna().any():  # most tables: row 1
            break
        if target is None:  # one pass over the target, before a pass over each column's next rows
            target = _as_text(frame[source.target])[0]
            counts = target.value_counts()
        label = target.iloc[row]
        if not (pd.isna(label) or counts.get(label, 0) == 1):
            break
        above = [(features[i], cells.iloc[i]) for i in np.flatnonzero(cells.notna().to_numpy())
                 if of_numbers(features[i])]
        if len(above) < 2:
            break
        leading += 1
        words = ", ".join(repr(str(word)) for _, word in above[:3]) + (", ..." if len(above) > 3 else "")
        shown.append(f"{words} above columns of numbers, no number, "
                     + ("no target" if pd.isna(label) else f"the target {str(label)!r}, which no other row has"))
    if not leading:
        return frame, None
    note = ("data row 1 is a second header line, dropped: " + shown[0] if leading == 1 else
            f"data rows 1-{leading} are more header lines, dropped: "
            + "; ".join(f"row {i + 1}: {part}" for i, part in enumerate(shown)))
    rest = frame.iloc[leading:].reset_index(drop=True)
    renamed = _names_from_header_rows(frame, leading, source.target)
    if renamed:
        rest = rest.rename(columns=renamed)
        note += ("; column names completed from it: "
                 + ", ".join(f"{old!r} -> {new!r}" for old, new in renamed.items()))
    return (rest.infer_objects() if excel else rest), note


_UNNAMED = re.compile(r"Unnamed: \d+")  # a blank header cell, as the reader names it


def _names_from_header_rows(frame: pd.DataFrame, rows: int, target: str) -> dict[str, str]:
    """New names for columns whose header cell is blank, from the ``rows`` header lines below
    the header (``_without_second_header``), where those name them: a group header ('Measurements'
    above 'height' and, in the blank or merged cell beside it, above 'weight') names each of its
    columns '<group> <name>' ('Measurements height', 'Measurements weight'); a blank header cell
    alone takes the name below it. Columns named in the header otherwise keep their names (units
    below names: 'age' above 'years' stays 'age'); a name already taken is not given."""
    columns = list(frame.columns)
    words = []
    for k, column in enumerate(columns):
        cells = [str(v).strip() for v in frame.iloc[:rows, k] if pd.notna(v) and str(v).strip()]
        words.append(" ".join(cells) if column != target else "")
    blank = [bool(_UNNAMED.fullmatch(str(c))) for c in columns]
    new: dict[int, str] = {}
    k = 0
    while k < len(columns):
        end = k + 1
        while end < len(columns) and blank[end] and words[end]:
            end += 1
        if not blank[k] and end > k + 1 and words[k]:  # a group header above its columns' names
            for j in range(k, end):
                new[j] = f"{columns[k]} {words[j]}"
            k = end
            continue
        if blank[k] and words[k]:
            new[k] = words[k]
        k += 1
    taken = {str(c) for j, c in enumerate(columns) if j not in new}
    renamed = {}
    for j, name in new.items():
        name = column_name(name)
        if name and name not in taken:
            renamed[columns[j]] = name
            taken.add(name)
    return renamed


def _warn_short_rows(frame: pd.DataFrame, path: Path, delimiter: str, opened: str, where: str,
                     tag: str = "fetch", skip: int = 0) -> None:
    """A warning naming a CSV's data rows with fewer fields than the header: pandas reads their
    missing last fields as empty cells, which is right for a row cut short and wrong for one that
    lost a field in the middle (its later values land in the wrong columns). Only a file whose
    last column has an empty cell can have such a row, so the others are not read again."""
    if frame.shape[1] < 2 or not frame.iloc[:, -1].eq("").any():
        return
    with io.TextIOWrapper(_csv_stream(path), encoding=opened, newline="") as fh:
        records = csv.reader(fh, delimiter=delimiter)
        for _ in range(skip + 1):  # the header, and a 'sep=' line above it
            next(records, None)
        # pandas skips blank lines and lines of spaces only
        fields = np.array([len(r) for r in records if len(r) > 1 or r and r[0].strip()], dtype=np.int64)
    if len(fields) != len(frame):  # lines that pandas reads otherwise (not aligned): no verdict
        fields = fields[:0]
    short = np.flatnonzero(fields < frame.shape[1])
    if len(short):
        counts = ", ".join(f"{int(fields[i])}" for i in short[:_SHOWN]) + (", ..." if len(short) > _SHOWN else "")
        many = len(short) > 1
        log(f"[{tag}] WARNING {where}: data {_rows(short + 1)} {'have' if many else 'has'} fewer fields than the "
            f"header's {frame.shape[1]} ({counts}); {'their' if many else 'its'} last columns are read as empty: if "
            f"a value was left out inside such a row, the values after it are in the wrong columns, so check "
            f"{'these rows' if many else 'this row'} in the file")


def _index_as_columns(frame: pd.DataFrame, where: str, tag: str = "fetch") -> pd.DataFrame:
    """A parquet file's named index levels (a column the writer made the index, e.g. with
    ``set_index``) back as columns; unnamed levels (row labels) dropped. Rows are counted from 0
    in file order."""
    names = [n for n in frame.index.names if n is not None]
    if names:
        log(f"[{tag}] {where}: index column(s) {', '.join(repr(str(n)) for n in names)} read as column(s)")
        frame = frame.reset_index(level=names)
    return frame.reset_index(drop=True)


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


def _numeric_cells(text: pd.Series, thousands, decimal) -> float:
    present = text.notna()
    return float(parse_numbers(text[present], thousands, decimal).notna().mean()) if present.any() else 0.0


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


_EXACT = 2 ** 53  # float64 holds every integer up to this exactly, and not every one beyond it


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


def _factorized(text: pd.Series) -> tuple[np.ndarray, pd.Series]:
    """The code of each cell of ``text`` (-1 for a missing one) and the distinct cells the codes
    index, in the order they first appear ("string" dtype)."""
    codes, uniques = pd.factorize(text)
    return codes, pd.Series(uniques, dtype="string")


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
        # a few words, each too rare alone ('1374 g' beside '2.2 kg'): units of one quantity, most likely
        if 1 < len(common) <= _FEW_UNITS and common.sum() >= needed:
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


def _column_record(column: str, forced: str | None, read_as: str) -> dict:
    """A feature column's record as the rules begin it (they add its kind, conversions and messages)."""
    return {"column": column, "forced": forced, "converted": {}, "warnings": [], "notices": [], "read_as": read_as}


def _infer_column(column: str, series: pd.Series, source, key: str, where: str) -> tuple[dict, pd.Series | None]:
    """One feature column of a local table: its record (what was inferred, converted, dropped and
    why, with the messages to log) and its values (float64 or category), None when dropped."""
    forced = ("numeric" if column in source.numeric else "categorical" if column in source.categorical
              else None)
    if pd.api.types.is_bool_dtype(series):
        read_as = "booleans"
    elif isinstance(series.dtype, pd.CategoricalDtype):
        read_as = "categories"
    elif pd.api.types.is_numeric_dtype(series):
        read_as = "numbers"
    elif pd.api.types.is_datetime64_any_dtype(series):
        read_as = "datetimes"
    elif pd.api.types.is_timedelta64_dtype(series):
        read_as = "durations"
    else:
        read_as = "text"
    record = _column_record(column, forced, read_as)
    if read_as in ("datetimes", "durations") and forced != "categorical":
        values, counted = _time_as_numbers(series)
        kind = "numeric"
        _note_time(record, read_as, series, values, counted)
    elif read_as == "numbers" and forced != "categorical":
        values = series.astype("float64")
        kind = "numeric"
        if forced is None and pd.api.types.is_integer_dtype(series.dtype):
            _merged_integers(column, series, values, key, record)
    else:
        try:
            text, tokens, formulas = _as_text(series)
            text, composed, spaced, invisible = _composed(text)
        except UnicodeDecodeError:  # bytes cells (a parquet binary column) that are not UTF-8
            bad = next(i for i, v in series.items() if isinstance(v, bytes) and not _utf8(v))
            raise DataError(f"{where}: column '{column}' holds binary values that are not UTF-8 text (row {bad}: "
                            f"{series[bad][:12]!r}); store it as text, or drop the column") from None
        if composed:
            record["notices"].append(f"column '{column}': {composed} cell(s) written with decomposed characters (an "
                                     f"accent as a mark of its own, as macOS writes text) read in their composed "
                                     f"form, so that a word written either way is one value")
        if invisible:
            record["notices"].append(_invisible_note(f"column '{column}'", invisible))
        if formulas:
            record["notices"].append(_formulas_note(f"column '{column}'", formulas))
        if tokens:
            record["converted"].update(tokens)
            _note_marks(record, column, tokens)
        kind = forced or (None if read_as == "text" else "categorical")
        distinct = None  # the column's distinct cells, for the rules that read them
        if kind != "categorical":
            negated = _parenthesised_negatives(text)  # accounting's '(1,234.50)' as '-1,234.50'
            cells = text if negated is None else negated
            values = parse_numbers(cells, source.thousands, source.decimal)
            present = text.notna()
            share = float(values[present].notna().mean()) if present.any() else 0.0
            # the cells the numbers are read from, the unit taken off them, what a date column's numbers count
            numbers, unit, counted = cells, None, None
            notations: dict[str, pd.Series] = {}  # cells written as bounds, with a minus after, as fractions
            timed = False  # dates or clock times read the column
            if share < 1 and present.any():  # a column of words has few
                distinct = _Cells.of(text)
            if share < NUMERIC_SHARE and present.any():
                dates, what = _iso_dates(distinct), "dates"
                if dates is None and source.date_order:
                    dates = _ordered_dates(distinct, source.date_order)
                    leading = "day" if source.date_order == "dmy" else "month"
                    what = f"dates ({leading} first, date_order: {source.date_order})"
                if dates is None:
                    dates, what = _month_name_dates(distinct), "dates (with month names)"
                if dates is None:
                    dates, what = _months_or_quarters(distinct)
                clock = _clock_times(distinct) if dates is None else None
                spans = _unit_durations(distinct) if dates is None and clock is None else None
                spans_what = "durations written with their units"
                if dates is None and clock is None and spans is None:
                    spans, spans_what = _written_durations(distinct) or (None, "")
                if dates is not None:
                    values, counted = _time_as_numbers(dates)
                    share, timed = float(values[present].notna().mean()), True
                elif clock is not None:
                    values, counted, what = clock, "hours", "times"
                    share, timed = float(values[present].notna().mean()), True
                elif spans is not None:
                    values, counted, what = spans, "seconds", spans_what
                    share, timed = float(values[present].notna().mean()), True
            # other notations: also in a column of plain numbers but a few cells ('<0.5' in a lab column,
            # '21-' in a ledger), which would otherwise be missing values; a unit only where it makes the
            # column numeric ('12%' in a few cells of plain numbers may be another scale: missing, warned)
            if not timed and share < 1 and present.any():
                other, notations = _other_notations(cells, source.decimal, distinct if cells is text else None)
                if other is not None:
                    other_values = parse_numbers(other, source.thousands, source.decimal)
                    other_share = float(other_values[present].notna().mean())
                    if other_share > share:
                        cells, values, share = other, other_values, other_share
                    else:
                        notations = {}
            if not timed and share < NUMERIC_SHARE and present.any():
                bare, unit = _without_unit(cells, distinct if cells is text else None)
                if unit:
                    numbers, bare_values = bare, parse_numbers(bare, source.thousands, source.decimal)
                    bare_share = float(bare_values[present].notna().mean())
                    if bare_share > share:
                        values, share = bare_values, bare_share
            if forced == "numeric" and not timed and share < NUMERIC_SHARE and present.any():
                scaled, magnitudes = _magnitude_values(numbers, source)  # '1.2k' beside '800'
                if magnitudes.any():
                    values = values.mask(magnitudes, scaled)
                    share = float(values[present].notna().mean())
                    notations["magnitudes"] = magnitudes
                truth = numbers.str.lower().map(_TRUTH).astype("float64")  # 'yes', 'TRUE', a parquet boolean
                if truth.notna().any() and share < NUMERIC_SHARE:
                    values = values.mask(truth.notna(), truth)
                    share = float(values[present].notna().mean())
                    notations["booleans"] = pd.Series(truth.notna().to_numpy(dtype=bool), index=text.index)
            unit_words: list[str] = []  # the words a column named in `numeric` writes its numbers with
            if forced == "numeric" and not timed and not unit and share < NUMERIC_SHARE and present.any():
                bare, unit, unit_words = _without_word(cells, distinct if cells is text else None)  # '71.3 kg'
                if unit:
                    numbers, values = bare, parse_numbers(bare, source.thousands, source.decimal)
                    share = float(values[present].notna().mean())
            if kind is None:
                kind = "numeric" if present.any() and share >= NUMERIC_SHARE else "categorical"
            elif not timed and share < NUMERIC_SHARE and present.any():  # named in `numeric`: '6,911.7'
                _refuse_foreign_numbers(column, numbers, source, key, where, unit,
                                        distinct if numbers is text else None, forced=True)  # its warning: not
            if kind == "numeric" and forced and not timed and present.any() and not values[present].notna().any():
                hint = _text_hint(column, distinct if distinct is not None else _Cells.of(text), key,
                                  source.date_order)  # what the cells are, and how to write them
                raise DataError(
                    f"{where}: column '{column}' is listed in '{key}.numeric', but none of its cells is a number "
                    f"({_quote(text[present].value_counts().to_dict())}), so it would be dropped: "
                    + (f"unlisted, {hint}" if hint else f"take it out of '{key}.numeric' to read it as categorical "
                                                        f"text, or write its cells as numbers in the file"))
            if kind == "numeric":
                if counted:
                    _note_time(record, what, text, values, counted)
                if unit:
                    with_unit = (present & values.notna() & text.str.contains(unit, regex=False)).fillna(False)
                    if with_unit.astype(bool).any():
                        first = with_unit.astype(bool).idxmax()
                        record["unit"] = unit
                        record["notices"].append(f"column '{column}': numbers written with '{unit}' (e.g. "
                                                 f"'{text[first]}'), read as the numbers without it "
                                                 f"({values[first]:g})")
                        # '20%' beside '0.2': two scales (percent and fraction) in one column
                        plain = (present & values.notna() & ~text.str.contains(unit, regex=False)
                                 & values.ne(0)).fillna(False).astype(bool)
                        if unit == "%" and plain.any():
                            other = plain.idxmax()
                            record["warnings"].append(
                                f"column '{column}': {int(with_unit.astype(bool).sum())} number(s) written with '%' "
                                f"(e.g. '{text[first]}', read as {values[first]:g}) and {int(plain.sum())} without "
                                f"(e.g. '{text[other]}', read as {values[other]:g}): if those are fractions "
                                f"({values[other]:g} for {100 * values[other]:g}%), the column holds two scales; "
                                f"write every cell one way in the file")
                if not _ascii(text):
                    scripts = (present & values.notna() & text.str.contains(_OTHER_DIGIT, regex=True)
                               ).fillna(False).astype(bool)
                    if scripts.any():
                        first = scripts.idxmax()
                        record["notices"].append(f"column '{column}': {int(scripts.sum())} number(s) written in "
                                                 f"the digits of another script than ASCII's (e.g. '{text[first]}'), "
                                                 f"read as their digits ({values[first]:g})")
                if negated is not None:
                    wrapped = (present & values.notna() & (negated != text)).fillna(False).astype(bool)
                    if wrapped.any():
                        first = wrapped.idxmax()
                        record["negatives"] = "parentheses"
                        record["notices"].append(f"column '{column}': {int(wrapped.sum())} number(s) written in "
                                                 f"parentheses, as accounting writes negatives (e.g. '{text[first]}'), "
                                                 f"read as negative ({values[first]:g})")
                for notation, mask in notations.items():
                    read = (mask & present & values.notna()).fillna(False).astype(bool)
                    if not read.any():
                        continue
                    first, count = read.idxmax(), int(read.sum())
                    if notation == "bounds":
                        record["bounds"] = count
                        record["notices"].append(
                            f"column '{column}': {count} number(s) written as bounds "
                            f"({_quote(text[read].value_counts().to_dict())}), read as the bound itself (e.g. "
                            f"'{text[first]}' is {values[first]:g}), as a value beyond a detection limit is "
                            f"often given: list '{column}' in '{key}.categorical' to keep them as text")
                    elif notation == "trailing minus":
                        record["negatives"] = ", ".join(filter(None, (record.get("negatives"), "trailing minus")))
                        record["notices"].append(
                            f"column '{column}': {count} number(s) written with the minus after them, as some "
                            f"accounting exports write negatives (e.g. '{text[first]}'), read as negative "
                            f"({values[first]:g})")
                    else:  # the notations of _NOTATIONS: a count and one example
                        field, written, read_as, keep = _NOTATIONS[notation]
                        record[field] = count
                        record["notices"].append(
                            f"column '{column}': {count} number(s) written {written} (e.g. '{text[first]}'), "
                            f"read as {read_as} ({values[first]:g})" + keep.format(column=column, key=key))
                if "text marked" in notations and not unit:  # "'00123" is a number with leading zeros
                    numbers = numbers.mask(notations["text marked"].fillna(False).astype(bool), cells)
                if "fractions" in notations:  # their values, written '0.125', are not digit groups
                    numbers = numbers.mask(notations["fractions"].fillna(False).astype(bool))
                if forced is None and not counted:  # '05:30' and '05/01/2020' are times, not codes
                    _zero_padded(column, numbers, values, key, record)
                    _merged_integers(column, numbers, values, key, record)
                grouped = _grouped_like(numbers, source.decimal) if source.thousands is None else None
                if grouped:
                    record["warnings"].append(
                        f"column '{column}': every '{source.decimal}' in it is followed by three digits, as a "
                        f"thousands separator would be (e.g. '{grouped}', read as "
                        f"{float(parse_numbers(pd.Series([grouped], dtype='string'), None, source.decimal)[0]):g}), "
                        f"and other cells have none: if '{source.decimal}' separates thousands here, set "
                        f"thousands: '{source.decimal}' and decimal: '{',' if source.decimal == '.' else '.'}' "
                        f"in '{key}'")
                words = text[present & values.isna()]
                if len(words):
                    counts = {str(k): int(v) for k, v in words.value_counts().items()}
                    record["converted"].update(counts)
                    record["warnings"].append(
                        f"column '{column}' is read as {what} ({100 * share:.1f}% of its cells are): {len(words)} "
                        f"other cell(s) read as missing ({_quote(counts)}): a day or time that does not exist, or "
                        f"not one" if timed else
                        f"column '{column}' is numeric ({100 * share:.1f}% of its cells are numbers): "
                        f"{len(words)} non-numeric cell(s) read as missing ({_quote(counts)})"
                        + (f"; its numbers are written with {len(unit_words)} different words ("
                           f"{', '.join(repr(w) for w in unit_words)}): if they are units of one quantity, "
                           f"convert every cell to one unit in the file" if 1 < len(unit_words) <= _FEW_UNITS else ""))
            else:
                record["number_share"] = round(share, 4)
                foreign = None
                if forced is None and present.any():
                    foreign = _refuse_foreign_numbers(column, numbers, source, key, where, unit,
                                                      distinct if numbers is text else None)
                if foreign:  # '7,464.85' beside 'unknown': the setting first, then the words
                    record["warnings"].append(foreign)
                elif forced is None and present.any():
                    # not for dates that date_order does not read: the text hint names the order they
                    # show (listing the column in `numeric` would read them wrongly); bounds not counted:
                    # '<100' beside '100<=X<500' are intervals, which `numeric` would read as 100 and missing
                    bounded = notations.get("bounds")
                    plain = share if bounded is None else float((values.notna() & ~bounded)[present].mean())
                    if plain >= 0.5 and not _misread_dates(text.dropna(), source.date_order):
                        others = text[present & values.isna()].value_counts().to_dict()
                        record["warnings"].append(
                            f"column '{column}' is read as categorical: only {100 * share:.1f}% of its cells are "
                            f"numbers (other values: {_quote(others)}); list it in '{key}.numeric' to read it as "
                            f"numbers (the rest become missing)"
                            + (f", or, if {' and '.join(repr(str(v)) for v in others)} "
                               f"{'mark' if len(others) > 1 else 'marks'} a missing value, list "
                               f"{'them' if len(others) > 1 else 'it'} in '{key}.missing_values'"
                               if len(others) <= 3 else ""))
        if kind == "categorical":
            values = text
            if spaced:  # not for numbers, whose digit groups a no-break space separates ('1 234,5')
                record["notices"].append(_spaces_note(f"column '{column}'", spaced))
            if forced is None and read_as == "text":
                hint = _text_hint(column, distinct if distinct is not None else _Cells.of(text), key,
                                  source.date_order)
                several = None if hint else _several_units(column, text.dropna(), source)
                unique = len(text) > source.max_categories and text.notna().all() and text.nunique() == len(text)
                code = _code_written(text) if unique else None
                if code:  # 'P-00017', 'ID0451': not a unit before numbers, which the hint would say
                    return _dropped_unique(record, column, text, key, "code", f"{code}, as ids are written",
                                           f"'{key}.numeric' to read its numbers (if they count or measure "
                                           f"something) or in "), None
                if hint:
                    record["notices"].append(hint)
                elif several:
                    record["warnings"].append(several)
                elif unique and text.str.contains(r"\d", regex=True).mean() < 0.5:
                    # names, free text (not a measurement written oddly: most cells without a digit)
                    return _dropped_unique(record, column, text, key, "text", "as a name or a comment has"), None
    record["kind"] = kind
    return _finish_column(column, values, record, source, key)


def _dropped_unique(record: dict, column: str, text: pd.Series, key: str, what: str, written: str,
                    keep: str = "") -> dict:
    """``record`` of a text column with a different ``what`` (text, code) in every row, dropped:
    each level would be one row, which no other row shares; ``keep``, another way to keep it."""
    record.update(kind="dropped", reason=f"a different {what} in every row")
    record["notices"].append(
        f"column '{column}' dropped: a different {what} in every one of its {len(text)} rows (e.g. "
        f"'{text.iloc[0]}', '{text.iloc[1]}'), {written}, which tells the rows apart but no row like another; "
        f"list it in {keep}'{key}.categorical' to keep it")
    return record


# a code: the same letters (and marks) around a number of one width ('P-00017', 'ID0451', 'A-0012-X'),
# with no space before the number ('Week 001', 'Day 07' count periods)
_CODE = r"(?P<before>[^\d\s]*[^\W\d_][^\d\s]*?|[#№]?)(?P<number>\d+)(?P<after>[^\d\s]*)"


def _code_written(text: pd.Series) -> str | None:
    """How a column's cells are written when each is a code, for the notice that drops it: the same
    letters before (or after) a number of one width, with leading zeros in some cells ('P-00017'),
    as ids are padded and amounts never are ('USD 775' beside 'USD 1020': a unit). None otherwise."""
    if not text.iloc[:64].str.fullmatch(_CODE).all():  # most columns fail here: no extract of every cell
        return None
    parts = text.str.extract(rf"^{_CODE}$")
    if parts["number"].isna().any() or parts["before"].nunique() != 1 or parts["after"].nunique() != 1:
        return None
    number = parts["number"]
    if number.str.len().nunique() != 1 or not number.str.startswith("0").any() or not (
            parts["before"].iloc[0] or parts["after"].iloc[0]):
        return None
    around = " and ".join(f"'{w}' {where}" for w, where in ((parts["before"].iloc[0], "before"),
                                                            (parts["after"].iloc[0], "after")) if w)
    return f"{around} numbers of {number.str.len().iloc[0]} digits, some with leading zeros"


def _finish_column(column: str, values: pd.Series, record: dict, source, key: str) -> tuple[dict, pd.Series | None]:
    """The rules every feature column goes through once its kind is known: the finite-number
    checks, the drops (all missing, a row index or id), and a categorical's levels."""
    kind, forced = record["kind"], record["forced"]
    if kind == "numeric":
        values = _finite_numbers(column, values, record)
        missing = np.isnan(values.to_numpy(dtype="float64"))  # float64 (numpy, not a pandas pass: thousands of columns)
    else:
        missing = values.isna().to_numpy()
    if missing.all():
        record.update(kind="dropped", reason="all missing")
        record["notices"].append(f"dropped all-missing column '{column}'")
        return record, None
    # a date, timestamp, time or duration is information even when the table is sorted by it, one
    # row per day (days since the earliest: 0, 1, 2, ... as a row id's integers), or written as its index
    index_like = None if forced else _index_like(column, values, kind, not missing.any())
    if index_like and "time_as" in record:
        looks = ("it has no header name and a distinct value in every row, as a row index written into the file"
                 if index_like[0] == "row index" else "its values increase strictly from row to row, as a row id's do")
        record["notices"].append(f"column '{column}' kept: {looks}, but it holds times ({record['time_as']}), "
                                 f"not an id")
        index_like = None
    elif index_like and index_like[0] == "row index" and _fractions(values, kind):
        record["notices"].append(f"column '{column}' kept: it has no header name and a distinct value in every "
                                 f"row, as a row index written into the file, but its numbers have fractions, "
                                 f"which an index's do not")
        index_like = None
    if index_like:
        reason, why, loud = index_like
        record.update(kind="dropped", reason=reason)
        record["warnings" if loud else "notices"].append(
            f"column '{column}' dropped: {why}; list it in '{key}.numeric' or '{key}.categorical' to keep it")
        return record, None
    record["missing"] = int(missing.sum())
    if kind == "numeric":
        present = values.to_numpy(dtype="float64")[~missing]
        one = present.min() == present.max()
        if one and not (forced and missing.any()):  # a constant, or present / missing
            if not missing.any():
                record["constant"] = f"{present[0]:g}"
                return record, values
            # as a number, its missing cells would become the train mean, that one value: a constant
            level = f"{present[0]:g}"
            record["kind"] = "categorical"
            record["notices"].append(
                f"column '{column}' holds one number ({level}) and {int(missing.sum())} missing cell(s): read as "
                f"categorical, a level '{level}' or missing, since as a number its missing cells would become "
                f"that value and the column a constant")
            values = pd.Series(np.where(missing, None, level), index=values.index, dtype=object)
        else:
            if one:  # forced, with missing cells: kept a number, as the user asked, but said
                record["warnings"].append(
                    f"column '{column}' is listed in '{key}.numeric' but holds one number ({present[0]:g}) and "
                    f"{int(missing.sum())} missing cell(s): as a number, its missing cells become that value and "
                    f"the column a constant, which tells no row from another; remove it from '{key}.numeric' to "
                    f"read it as a level or missing")
            _code_notice(column, values, missing, key, record)
            return record, values
    kind = record["kind"]
    if source.merge_spellings:
        values, merged = _merge_spellings(values, source.merge_spellings)
        if merged:
            record["merged_levels"] = sum(len(g) - 1 for g, _ in merged)
            record["notices"].append(f"column '{column}': {_merged_note(merged, source.merge_spellings)}")
    same = _spellings(values)
    for kind_of, what in (("number", "the same number"), ("case", "the same word in other cases"),
                          ("spacing", "the same words with other spacing"),
                          ("mark", "the same words, marked as text for a spreadsheet or not")):
        if same[kind_of]:
            record["notices"].append(f"column '{column}': levels that are {what} ({_spelled(same[kind_of], values)}) "
                                     f"stay different levels: list '{kind_of}' in '{key}.merge_spellings' to read "
                                     f"them as one")
    values = values.astype(object).where(values.notna(), None)
    counts = pd.Series(values).value_counts()
    if len(counts) > source.max_categories:
        keep = set(counts.index[:source.max_categories - 1])
        # the level the rest become: 'other', unless a level kept has that name (the folded rows
        # would join its rows)
        into = next(name for name in ("other", *(f"other ({k})" for k in range(2, len(keep) + 3)))
                    if name not in keep)
        folded = pd.Series(values).notna() & ~pd.Series(values).isin(keep)
        values = pd.Series(values).where(~folded, into)
        record["folded"] = {"levels": int(len(counts) - len(keep)), "rows": int(folded.sum())}
        if into != "other":
            record["folded"]["into"] = into
        record["warnings"].append(f"column '{column}' has {len(counts)} levels > max_categories "
                                  f"{source.max_categories}: kept the {len(keep)} most frequent, the rest -> "
                                  f"'{into}' ({int(folded.sum())} rows)"
                                  + (" (the column has a level 'other' of its own)" if into != "other" else ""))
    result = values.astype("category")
    record["levels"] = int(len(result.cat.categories))
    if record["levels"] == 1 and not missing.any():
        record["constant"] = str(result.cat.categories[0])
    return record, result


# values that files (surveys, statistics offices, legacy exports) write where a value is missing
_CODES = frozenset({-1.0, -9.0, -99.0, -999.0, -9999.0, -99999.0, 99.0, 999.0, 9999.0, 99999.0, 999999.0})


def _code_notice(column: str, values: pd.Series, missing: np.ndarray, key: str, record: dict) -> None:
    """A notice for a numeric column whose smallest or largest value is one that files write for a
    missing value (``_CODES``: -999, 9999, ...) and stands apart from the others (a negative one
    below values that are all 0 or more; a positive one at least 1.1 times the largest other),
    in at least 3 cells and 0.5 % of them: read as a number, it would stretch the column's scale,
    so the notice names ``missing_values``. Two comparisons for a column without one."""
    numbers = values.to_numpy(dtype="float64")[~missing]
    if len(numbers) < 20:
        return
    with np.errstate(invalid="ignore"):
        ends = {float(numbers.min()), float(numbers.max())}
    for code in sorted(ends & _CODES):
        at = numbers == code
        cells = int(at.sum())
        rest = numbers[~at]
        if cells < 3 or cells < 0.005 * len(numbers) or not len(rest) or not np.isfinite(rest).all():
            continue
        low, high = float(rest.min()), float(rest.max())
        if (code < 0 and low < 0) or (code > 0 and code < 1.1 * high):
            continue
        record["notices"].append(
            f"column '{column}': {cells} cell(s) are {code:g}, {'below' if code < 0 else 'above'} every other value "
            f"({low:g} to {high:g}), as a code for a missing value is: if it is one, list it in "
            f"'{key}.missing_values' (read as a number, it stretches the column's scale)")


def _spellings(text: pd.Series) -> dict[str, list[list[str]]]:
    """Distinct cells of ``text`` that are one value written in several ways: the same number
    ('1', '1.0', '01', "'1" marked as text for a spreadsheet), the same word in other cases ('Yes',
    'yes'), the same words with other spacing ('New York', 'New  York') or the same words marked
    as text for a spreadsheet ("'A" beside 'A'); each a list of groups."""
    levels = pd.Series(text.dropna().unique(), dtype="string")
    numbers = parse_numbers(_without_text_mark(levels).fillna(levels))
    found: dict[str, list[list[str]]] = {"number": [], "case": [], "spacing": [], "mark": []}
    words = levels.where(numbers.isna())
    for kind, keys in (("number", numbers), ("case", words.str.lower()),
                       ("spacing", words.str.replace(r"\s+", " ", regex=True)),
                       ("mark", words.str.replace(r"^'(.+)$", r"\1", regex=True))):
        present = keys.notna()
        if not keys[present].duplicated().any():  # most columns: no two cells alike (a groupby costs ~2 ms)
            continue
        groups = levels[present].groupby(keys[present]).agg(list)
        found[kind] = [sorted(map(str, g)) for g in groups if len(g) > 1]
    return found


def _merge_spellings(values: pd.Series, kinds: tuple[str, ...]) -> tuple[pd.Series, list[tuple[list[str], int]]]:
    """``values`` (a categorical's cells) with the levels that are one value written in the ways
    ``kinds`` names (``SPELLINGS``: other case, spacing, a spreadsheet's text mark, the same number)
    read as the spelling most of their cells use (ties: the first in sorted order); and each group
    merged, its spellings (the one kept first) with the cells read as another."""
    text = values.astype("string")
    counts = text.value_counts()
    if len(counts) < 2:
        return values, []
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))  # most cells first
    levels = pd.Series([level for level, _ in ordered], dtype="string")
    keys = levels.str.replace(r"^'(.+)$", r"\1", regex=True) if "mark" in kinds else levels
    if "spacing" in kinds:
        keys = keys.str.replace(r"\s+", " ", regex=True)
    if "case" in kinds:
        keys = keys.str.lower()
    if "number" in kinds:
        numbers = parse_numbers(_without_text_mark(levels).fillna(levels))
        keys = keys.mask(numbers.notna(), "\0" + numbers.astype("string"))  # not a word's key
    if not keys.duplicated().any():
        return values, []
    kept, merged, size = {}, [], dict(ordered)
    for group in levels.groupby(keys, sort=False).agg(list):
        if len(group) > 1:  # in the order of ``levels``: the spelling most cells use first
            kept.update({str(level): str(group[0]) for level in group[1:]})
            merged.append(([str(v) for v in group], sum(size[v] for v in group[1:])))
    hit = text.isin(list(kept)).fillna(False).to_numpy(dtype=bool)
    first = {}  # the value a spelling kept stands for, in the column's own type (a category of numbers)
    for spelled in set(kept.values()):
        first[spelled] = values[(text == spelled).fillna(False).to_numpy(dtype=bool)].iloc[0]
    replaced = values.astype(object).copy()
    replaced[hit] = [first[kept[str(v)]] for v in text[hit]]
    return replaced.where(values.notna(), None), merged


def _merged_note(merged: list[tuple[list[str], int]], kinds: tuple[str, ...], limit: int = 3) -> str:
    """What ``_merge_spellings`` merged: "1 other spelling(s) read as the one most cells use
    (merge_spellings: case; 67 cells): 'True' -> 'TRUE'; ..."."""
    spellings = sum(len(g) - 1 for g, _ in merged)
    shown = "; ".join(" / ".join(f"'{v}'" for v in g[1:]) + f" -> '{g[0]}'" for g, _ in merged[:limit])
    more = f"; ... ({len(merged) - limit} more)" if len(merged) > limit else ""
    return (f"{spellings} other spelling(s) read as the one most cells use (merge_spellings: {', '.join(kinds)}; "
            f"{sum(n for _, n in merged)} cells): {shown}{more}")


def _spelled(groups: list[list[str]], text: pd.Series, limit: int = 3) -> str:
    """'1' x40 / '1.0' x38; ... for the first groups."""
    counts = text.value_counts()
    shown = "; ".join(" / ".join(f"'{v}' x{int(counts[v])}" for v in g) for g in groups[:limit])
    return shown + (f"; ... ({len(groups) - limit} more)" if len(groups) > limit else "")


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


def _refuse_foreign_numbers(column: str, text: pd.Series, source, key: str, where: str,
                            unit: str | None = None, cells: _Cells | None = None,
                            forced: bool = False) -> str | None:
    """A text column that is numbers written with a thousands separator or a decimal comma (which
    the source's settings do not read) is an error naming the setting that reads it (``text``: its
    cells without the ``unit`` they are written with, if any; ``cells``: its distinct cells, when the
    caller has them; ``forced``: the column is named in ``numeric``, whose cells the settings would
    make missing). A column that such a setting would make mostly (not all) numbers, beside
    words ('7,464.85' beside 'unknown'), gets a warning instead, returned: it names the setting and
    the other values."""
    written = text.dropna()
    distinct, counts = (cells.distinct, cells.counts) if cells is not None else _distinct(written)
    if counts[distinct.str.contains(r"\d", regex=True).to_numpy(dtype=bool)].sum() / len(written) < 0.5:
        return None  # not numbers in any convention (the common case: names, codes with letters)
    shares: dict[tuple, float] = {}
    for thousands, decimal in _CONVENTIONS:
        if thousands is not None and not written.str.contains(_separator(thousands), regex=True).any():
            thousands = None  # the separator is not used: the simpler convention says the same
        if (thousands, decimal) not in shares and (thousands, decimal) != (source.thousands, source.decimal):
            shares[(thousands, decimal)] = _numeric_cells(text, thousands, decimal)
    fits = [c for c, s in shares.items() if s >= NUMERIC_SHARE]
    if not fits:
        return _mostly_foreign_numbers(column, text, source, key, shares, unit)
    marks = {t for t, _ in fits if t} | {d for _, d in fits if d != source.decimal}  # what the settings miss
    shown = written[written.map(lambda cell: any(m in cell for m in marks)).astype(bool)]
    example = shown.iloc[0] if len(shown) else written.iloc[0]
    options = " or ".join(_settings(t, d, source) for t, d in fits)
    current = (f"thousands separator '{source.thousands}'" if source.thousands else "no thousands separator")
    ambiguous = [t for t, d in fits if t and (None, t) in fits and _grouped_like(text, t)]
    note = (f" (every '{ambiguous[0]}' in it is followed by three digits: a thousands separator, most likely; as a "
            f"decimal mark, '{example}' would read as a number a thousand times smaller)" if ambiguous else "")
    example = f"'{example}'" + (f" (with '{unit}', which is read)" if unit else "")
    other = (f" (named in '{key}.numeric', the column would have them missing)" if forced else
             f", or list '{column}' in '{key}.categorical' to keep them as text")
    raise DataError(f"{where}: column '{column}' holds numbers written like {example}, which are not numbers "
                    f"with {current} and decimal mark '{source.decimal}'; set {options} in '{key}' to read "
                    f"them as numbers{note}{other}")


def _settings(thousands: str | None, decimal: str, source) -> str:
    """The keys that read numbers written with ``thousands`` and ``decimal``, as params.yaml writes them."""
    return ", ".join(([f"thousands: {repr(thousands) if thousands else 'null'}"] if thousands != source.thousands else [])
                     + ([f"decimal: '{decimal}'"] if decimal != source.decimal else []))


def _mostly_foreign_numbers(column: str, text: pd.Series, source, key: str, shares: dict,
                            unit: str | None) -> str | None:
    """The warning for a categorical column that another convention of ``shares`` (its share of
    number cells under each) reads as mostly numbers, at least half and more than the source's
    own settings do, or None."""
    best = max(shares.values(), default=0.0)
    current = _numeric_cells(text, source.thousands, source.decimal)
    if best < 0.5 or best < current + 0.05:
        return None
    ties = [c for c, s in shares.items() if s == best]  # '1,234' beside words: thousands or a decimal comma
    thousands, decimal = ties[0]
    present = text.notna()
    read = parse_numbers(text[present], thousands, decimal)
    plain = parse_numbers(text[present], source.thousands, source.decimal)
    example = text[present][read.notna() & plain.isna()].iloc[0]
    others = text[present][read.isna()].value_counts().to_dict()
    words = (f", and list {' and '.join(repr(str(v)) for v in others)} in '{key}.missing_values' if "
             f"{'they mark' if len(others) > 1 else 'it marks'} a missing value" if len(others) <= 3 else "")
    written = f"'{example}'" + (f" (with '{unit}', which is read)" if unit else "")
    own = (f"thousands separator '{source.thousands}'" if source.thousands else "no thousands separator")
    return (f"column '{column}' is read as categorical: {100 * current:.1f}% of its cells are numbers with {own} "
            f"and decimal mark '{source.decimal}', but {100 * best:.1f}% are numbers written like {written} (other "
            f"values: {_quote(others)}); set {' or '.join(_settings(t, d, source) for t, d in ties)} in '{key}' to read them as "
            f"numbers{words} (or list the column in '{key}.numeric': the rest become missing)")


def _finite_numbers(column: str, values: pd.Series, record: dict) -> pd.Series:
    """Infinite values and magnitudes beyond float32 become missing, each reported with its rows."""
    v = values.to_numpy(dtype="float64")
    with np.errstate(invalid="ignore", over="ignore"):
        infinite = np.isinf(v)
        huge = ~np.isnan(v) & ~infinite & (np.abs(v) > FLOAT32_MAX)
    if not (infinite.any() or huge.any()):
        return values
    if infinite.any():
        record["infinite"] = {"cells": int(infinite.sum()), "rows": [int(i) for i in values.index[infinite][:_SHOWN]]}
        record["warnings"].append(f"column '{column}': {int(infinite.sum())} infinite value(s) read as missing "
                                  f"({_rows(values.index[infinite])})")
    if huge.any():
        record["out_of_range"] = {"cells": int(huge.sum()), "largest": float(values[huge].abs().max()),
                                  "rows": [int(i) for i in values.index[huge][:_SHOWN]]}
        record["warnings"].append(
            f"column '{column}': {int(huge.sum())} value(s) beyond the float32 range (largest magnitude "
            f"{float(values[huge].abs().max()):.3g} > {FLOAT32_MAX:.3g}) read as missing ({_rows(values.index[huge])})")
    return values.mask(infinite | huge)


def _fractions(values: pd.Series, kind: str) -> bool:
    """Whether a numeric column holds a number with a fraction (which no row index or id has)."""
    if kind != "numeric":
        return False
    v = values.to_numpy(dtype="float64")
    return bool((v[np.isfinite(v)] != np.round(v[np.isfinite(v)])).any())


def _index_like(column: str, values: pd.Series, kind: str, complete: bool) -> tuple[str, str, bool] | None:
    """Why a column is a row index rather than a feature (short, long, and whether to warn: the
    column may be a feature), or None: a header-less column with a distinct value in every row (an
    index written with the table; ``_finish_column`` keeps one of numbers with fractions), or a
    column of integers that increase strictly from row to row
    (a row id; with gaps between them, also what a feature looks like when the table is sorted by
    it, hence a warning). ``complete``: no cell of ``values`` is missing."""
    if _INDEX_NAME.fullmatch(column) and complete and values.nunique() == len(values):
        return ("row index", "a row index written into the file (no header name, a distinct value in every row)",
                False)
    if kind == "numeric" and complete and len(values) >= 3:
        v = values.to_numpy()
        steps = np.diff(v)
        if (v == np.round(v)).all() and (steps > 0).all():
            if (steps == 1).all():
                return "row id", f"a row id (integers increasing by 1 from row to row, {v[0]:.0f} to {v[-1]:.0f})", False
            return ("row id", f"a row id (integers increasing strictly from row to row, with gaps, {v[0]:.0f} to "
                              f"{v[-1]:.0f}), or a feature the table is sorted by", True)
    return None


def _repeated_rows(table: pd.DataFrame) -> tuple[str | None, dict[str, int]]:
    """The notice for rows of a local table (its features and ``LABEL``) that repeat another row
    exactly, and for rows whose features another row of another class has (None when there are
    none), and the two counts (``repeated_rows``, ``rows_sharing_features``) where not 0. The split
    does not keep copies together (the benchmark tables have them too: dna 184, cmc 48), so a row
    and its copy can be support and query of one episode. Rows are compared by
    their 64-bit hashes (pandas' ``hash_pandas_object``: 42 ms for 10,000 x 785)."""
    features = table.drop(columns=LABEL)
    if features.empty:
        return None, {}
    hashed = pd.util.hash_pandas_object(features, index=False).to_numpy()
    again = pd.Series(hashed).duplicated(keep=False).to_numpy()
    if not again.any():
        return None, {}
    same, label = pd.Series(hashed[again]), pd.Series(table[LABEL].cat.codes.to_numpy()[again])
    copies = int(pd.DataFrame({"row": same, "label": label}).duplicated().sum())
    clashing = int((label.groupby(same).transform("nunique") > 1).sum())
    if not copies and not clashing:
        return None, {}
    parts = ([f"{copies} row(s) repeat an earlier row exactly (features and class): the split keeps no copies "
              f"together, so a row and its copy can be support and query of one episode (the benchmark tables "
              f"have such rows too)"] if copies else []) + \
        ([f"{clashing} row(s) share their features with a row of another class"] if clashing else [])
    counts = {k: v for k, v in (("repeated_rows", copies), ("rows_sharing_features", clashing)) if v}
    return "; ".join(parts), counts


def _gives_the_class(values: pd.Series, classes: np.ndarray, first: int = 256) -> bool:
    """Whether a feature column determines the target: at most one class per value over the rows
    that have one (95 % of the rows or more), with fewer distinct values than a fifth of the rows
    (not an id, whose values are each one row's), so that it is the target written again or
    derived from it. The first ``first`` rows decide for most columns (a value seen there with two
    classes; or no value repeated there, a measurement or an id, which is not checked further),
    sorted in numpy (tens of microseconds), so a table of many columns costs little. ``classes``:
    the target's category codes."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        numbers = values.cat.codes.to_numpy().astype(np.float64)
        numbers[numbers < 0] = np.nan
    else:
        numbers = values.to_numpy(dtype="float64")
    for rows in (slice(0, first), slice(None)):
        part, known = numbers[rows], classes[rows]
        keep = ~np.isnan(part)
        part, known = part[keep], known[keep]
        if not len(part):
            return False
        order = np.lexsort((known, part))
        part, known = part[order], known[order]
        same = part[1:] == part[:-1]
        if (same & (known[1:] != known[:-1])).any():  # a value with two classes
            return False
        if rows.stop == first and len(part) == first and not same.any():
            return False  # no value repeats in the first rows: a measurement or an id, not checked further
    present = ~np.isnan(numbers)
    if present.mean() < 0.95:
        return False
    return 2 <= len(np.unique(numbers[present])) < present.sum() / 5


# a text in `missing_values` that is a number written plainly ('-999', '9999.0'; not '007', whose
# leading zero makes it a code) is that number too: '-999' finds '-999.0' and -999 stored as a number
_PLAIN_NUMBER = re.compile(r"[+-]?(?:0|[1-9]\d*)(?:\.\d+)?")


def _missing_values_marked(frame: pd.DataFrame, source) -> tuple[pd.DataFrame, dict[str, dict[str, int]], list]:
    """The feature columns of ``frame`` with the cells that ``source.missing_values`` names made
    missing (a text equal to one of its texts, stripped; a number, or a text read as one, equal to
    one of its numbers: -999 finds '-999', '-999.0' and -999 stored as a number; a text written as
    a plain number, '-999', is that number too), per column the values so marked and their counts
    (value as written -> cells), and the listed values that no feature cell holds. A CSV's cells
    become empty, as its missing cells are; a categorical loses those levels. ``missing_values`` as
    a mapping (column -> values) marks each column's own values only; then an unused value is
    returned as '<value> (for <column>)'."""
    if not source.missing_values:
        return frame, {}, []
    per_column = source.missing_values if isinstance(source.missing_values, dict) else None
    split = {column: _words_and_numbers(listed) for column, listed in per_column.items()} if per_column else {}
    every = _words_and_numbers(source.missing_values) if per_column is None else None
    frame, marked, unused, all_found = frame.copy(), {}, [], set()
    for column in frame.columns:
        series = frame[column]
        if column == source.target or pd.api.types.is_bool_dtype(series):
            continue
        listed = per_column.get(column, ()) if per_column is not None else source.missing_values
        if not listed:
            continue
        words, numbers = split[column] if per_column is not None else every
        found = set()
        if pd.api.types.is_numeric_dtype(series):
            as_number = series.where(series.isin(numbers)) if numbers else pd.Series(np.nan, index=series.index)
            hit = as_number.notna()
            written = series
        else:
            written = _unformula(series.astype("string").str.strip())[0]  # '="-999"' is '-999'
            hit = written.isin(words).fillna(False)
            found.update(written[hit].unique())
            as_number = parse_numbers(written, source.thousands, source.decimal) if numbers else None
            if numbers:
                as_number = as_number.where(as_number.isin(numbers))
                hit |= as_number.notna()
        hit = hit.fillna(False).to_numpy(dtype=bool)
        if as_number is not None:
            found.update(float(v) for v in as_number.dropna().unique())
        if per_column is not None:
            unused += [f"{_shown(v)} (for '{column}')" for v in _not_found(listed, found)]
        else:
            all_found.update(found)
        if not hit.any():
            continue
        marked[column] = {(f"{v:g}" if isinstance(v, float) else str(v)): int(n)
                          for v, n in written[hit].value_counts().items()}
        if isinstance(series.dtype, pd.CategoricalDtype):
            levels = set(written[hit])
            frame[column] = series.cat.remove_categories([c for c in series.cat.categories
                                                          if str(c).strip() in levels])
        elif pd.api.types.is_numeric_dtype(series):
            frame[column] = series.astype("float64").mask(hit)
        else:  # an empty cell, as a CSV's missing cells are
            frame[column] = series.mask(hit, "")
    if per_column is None:
        unused = [_shown(v) for v in _not_found(source.missing_values, all_found)]
    return frame, marked, unused


def _words_and_numbers(listed) -> tuple[set[str], list[float]]:
    """A ``missing_values`` list's texts, and its numbers with the texts written as plain numbers."""
    words = {v for v in listed if isinstance(v, str)}
    numbers = [v for v in listed if not isinstance(v, str)]
    return words, numbers + [float(v) for v in words if _PLAIN_NUMBER.fullmatch(v) and float(v) not in numbers]


def _not_found(listed, found: set) -> list:
    """The values of ``listed`` (a ``missing_values`` list) that ``found`` (the cells marked) lacks."""
    return [v for v in listed if v not in found and not (isinstance(v, str) and _PLAIN_NUMBER.fullmatch(v)
                                                          and float(v) in found)]


def _shown(value: str | float) -> str:
    return repr(value) if isinstance(value, str) else f"{value:g}"


def _not_found_hint(root: Path, listed: str) -> str:
    """Why a local table's file may be missing: a name that differs only in case or a few letters
    ('Mine.csv'), or, in a queued or temporary DVC experiment (run in a copy under .dvc/tmp/exps),
    a file that git does not track, which DVC leaves out of the copy."""
    folder = (root / listed).parent
    names = sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    close = [n for n in names if n.lower() == Path(listed).name.lower()] or difflib.get_close_matches(
        Path(listed).name, names, n=1, cutoff=0.8)
    if close:
        return f" (did you mean '{(Path(listed).parent / close[0]).as_posix()}'?)"
    if ".dvc/tmp/exps" in Path(root).resolve().as_posix():
        return (f": a queued or temporary experiment runs in a copy of the repository that holds only the files "
                f"git or DVC tracks; in the workspace, `git add {listed}` (staged is enough), then queue the "
                f"experiment again")
    return ""


def load_local_table(name: str, source, root: Path, stage: str = "fetch") -> tuple[pd.DataFrame, dict]:
    """A user's CSV / TSV / parquet / Excel / ARFF table (``sources.<name>.path``) in the raw table format.

    Every column's type is inferred by fixed rules (docs/own-table.md) and recorded: a column
    of numbers is numeric, a text column whose non-missing cells are at least ``NUMERIC_SHARE``
    numbers is numeric with its other cells missing; infinite values and magnitudes beyond
    float32 are missing; text, boolean and categorical columns are categorical with at most
    ``max_categories`` levels (the rest fold into "other"); a row index or a strictly increasing
    integer id, and an all-missing column, are dropped; ``numeric`` / ``categorical`` force a
    column's type (and keep it). Rows without a target are dropped. The record of every column
    rides along with the table (``frame.attrs[SCHEMA_ATTR]``) for preprocess's schema report.
    Its notices and warnings are logged tagged ``[<stage> <name>]``: the stage reading the table.
    """
    key = f"sources.{name}"
    where = f"dataset '{name}' ({source.path})"
    _check_inside_repository(root, source.path, where, f"{key}.path")
    path = root / source.path
    if not path.is_file():
        raise DataError(f"{where}: file not found{_not_found_hint(root, source.path)}")
    delimiter = csv_delimiter(source)
    frame = _read_local(path, where, key, delimiter, source.encoding, source.sheet, stage, source.target,
                        source.header_row)
    # a workbook's cells holding a formula's error, which pandas reads as empty: column -> error -> cells
    sheet_errors = {frame.columns[i]: found for i, found in frame.attrs.pop(SHEET_ERRORS, {}).items()
                    if i < frame.shape[1]}
    uncomputed = {frame.columns[i]: found for i, found in frame.attrs.pop(SHEET_UNCOMPUTED, {}).items()
                  if i < frame.shape[1]}
    if frame.shape[1] == 0:
        raise DataError(f"{where}: the sheet read is empty (set '{key}.sheet' to read another)"
                        if local_format(path) == "excel" else f"{where}: the file has no columns")
    if source.target not in frame.columns:
        close = [c for c in frame.columns if c.lower() == source.target.lower()]
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        below = "" if close or local_format(path) not in ("csv", "tsv", "excel") else _names_below(
            path, source.target, delimiter, _text_encoding(source.encoding), source.sheet, key)
        other = "" if close or below or local_format(path) != "excel" else _sheet_with(path, source.target, source.sheet,
                                                                                        key)
        if below:
            hint += f" ({below})"
        elif other:
            hint += f" ({other})"
        elif frame.shape[1] == 1 and local_format(path) in ("csv", "tsv"):
            hint += _delimiter_hint(path, delimiter, key, _text_encoding(source.encoding))
        raise DataError(f"{where}: target column '{source.target}' not found{hint}; "
                        f"columns: {', '.join(frame.columns[:20])}{' ...' if frame.shape[1] > 20 else ''}")
    if frame.empty:
        raise DataError(f"{where}: no data rows")
    header_note = None
    if local_format(path) in ("csv", "tsv", "excel"):
        frame, header_note = _without_second_header(frame, source, local_format(path) == "excel")
    per_column = list(source.missing_values) if isinstance(source.missing_values, dict) else []
    for option, names in (("categorical", source.categorical), ("numeric", source.numeric),
                          ("missing_values", per_column)):
        absent = [c for c in names if c not in frame.columns]
        if absent:
            raise DataError(f"{where}: '{option}' names column(s) not in the file: {absent}")
        if source.target in names:
            raise DataError(f"{where}: the target '{source.target}' is listed in '{option}'")
    notes = [header_note] if header_note else []
    frame, marked_by_source, unused = _missing_values_marked(frame, source)
    if unused:  # a typo ('unknwon'), or a value written otherwise in the file ('N/A' for 'NA')
        cells = "no cell of its column" if isinstance(source.missing_values, dict) else "no feature cell"
        notes.append(f"WARNING '{key}.missing_values' lists {', '.join(unused)}, which {cells} holds: check how "
                     f"the file writes {'them' if len(unused) > 1 else 'it'}")
    target, marks, formulas = _as_text(frame[source.target])
    if formulas:
        notes.append(_formulas_note(f"target column '{source.target}'", formulas))
    target, composed, spaced, invisible = _composed(target)
    if composed:
        notes.append(f"target column '{source.target}': {composed} cell(s) written with decomposed characters read "
                     f"in their composed form, so that a class written either way is one class")
    if spaced:
        notes.append(_spaces_note(f"target column '{source.target}'", spaced))
    if invisible:
        notes.append(_invisible_note(f"target column '{source.target}'", invisible))
    unlabeled = int(target.isna().sum())
    if unlabeled:
        frame, target = frame[target.notna()], target[target.notna()]
        marks, errors = _split_errors(marks)
        errors = {**errors, **sheet_errors.get(source.target, {})}
        marked = sum(marks.values())
        notes.append(f"WARNING dropped {unlabeled} rows without a target, {marked} of them for a missing-value "
                     f"mark ({_quote(marks)}), which may be a class ('None', 'NA' for North America): to keep such "
                     f"rows, write that class another way in the file"
                     if marked >= 3  # as many as a class needs: 'None' or 'NA' may be one
                     else f"dropped {unlabeled} rows without a target")
        if errors:  # a class computed by a formula that failed
            notes.append("WARNING " + _errors_note(f"target column '{source.target}'", errors)
                         + " (their rows are among those dropped)")
        if source.target in uncomputed:
            notes.append("WARNING " + _uncomputed_note(f"target column '{source.target}'",
                                                       *uncomputed[source.target])
                         + " (their rows are among those dropped)")
    if source.merge_spellings:
        target, merged = _merge_spellings(target, source.merge_spellings)
        target = target.astype("string")
        if merged:
            notes.append(f"target column '{source.target}': {_merged_note(merged, source.merge_spellings)}")
    if target.nunique() < 2:
        raise DataError(f"{where}: target column '{source.target}' has "
                        f"{target.nunique()} distinct value(s); classification needs at least two")
    numbers = parse_numbers(target)
    if numbers.notna().all() and (numbers != numbers.round()).any() and target.nunique() > len(target) / 2:
        raise DataError(f"{where}: target column '{source.target}' holds {target.nunique()} distinct numbers in "
                        f"{len(target)} rows, not classes (a continuous target?); few-shot classification needs "
                        f"a class per row: bin the values into classes")
    if target.nunique() == len(target) and len(target) > 2:
        raise DataError(f"{where}: target column '{source.target}' has a different value in every one of its "
                        f"{len(target)} rows (e.g. {target.iloc[0]!r}, {target.iloc[1]!r}), as an id or a name has, "
                        f"not classes: set '{key}.target' to the label column")
    same = _spellings(target)
    if same["number"]:
        raise DataError(f"{where}: target column '{source.target}' writes a class in several ways "
                        f"({_spelled(same['number'], target)}), which would make them different classes; "
                        f"write each class one way in the file, or list 'number' in '{key}.merge_spellings' to "
                        f"read them as one")
    for kind_of, what in (("case", "case"), ("spacing", "spacing"),
                          ("mark", "a spreadsheet's text mark (a leading ')")):
        if same[kind_of]:
            notes.append(f"WARNING target column '{source.target}': classes that differ only in {what} "
                         f"({_spelled(same[kind_of], target)}) are different classes: list '{kind_of}' in "
                         f"'{key}.merge_spellings' to read them as one")
    records, out = [], {}
    plain = {}
    if local_format(path) in ("csv", "tsv") and source.thousands is None and source.decimal == ".":
        plain = _plain_number_columns(frame, [c for c in frame.columns if c != source.target
                                              and c not in source.numeric and c not in source.categorical])
    for column in frame.columns:
        if column == source.target:
            continue
        if column in plain:  # the record _infer_column gives such a column, without its passes
            record = {**_column_record(column, None, "text"), "kind": "numeric"}
            record, values = _finish_column(column, plain[column], record, source, key)
        else:
            record, values = _infer_column(column, frame[column], source, key, where)
        if column in sheet_errors:  # read as missing cells by pandas: counted and named as in a CSV
            found = sheet_errors[column]
            record["converted"] = {**record["converted"], **found}
            record["notices"].append(_errors_note(f"column '{column}'", found))
        if column in uncomputed:
            record["converted"] = {**record["converted"], "formula without a stored value": uncomputed[column][0]}
            record["warnings"].append(_uncomputed_note(f"column '{column}'", *uncomputed[column]))
        if column in marked_by_source:
            listed = marked_by_source[column]
            record["converted"] = {**listed, **record["converted"]}
            record["notices"].insert(0, f"column '{column}': {sum(listed.values())} cell(s) marked missing "
                                        f"by '{key}.missing_values' ({_quote(listed)})")
        records.append(record)
        if values is not None:
            zero_based = isinstance(values.index, pd.RangeIndex) and values.index.start == 0 and values.index.step == 1
            out[column] = values if zero_based else values.reset_index(drop=True)
    constant = {r["column"]: r["constant"] for r in records if "constant" in r}
    if constant:  # kept, so that a table's columns stay its columns; the encoder learns nothing from them
        notes.append(f"{len(constant)} column(s) hold one value in every row, which tells no row from another "
                     f"({', '.join(f'{c!r}: {v!r}' for c, v in list(constant.items())[:_SHOWN])}"
                     f"{', ...' if len(constant) > _SHOWN else ''}): kept, as constants")
    if len(out) < 2:
        dropped = "; ".join(f"'{r['column']}': {r['reason']}" for r in records if r["kind"] == "dropped")
        kept = f"one feature column ('{next(iter(out))}')" if out else "no feature columns"
        raise DataError(f"{where}: {kept} besides the target '{source.target}'"
                        + (f" (dropped {dropped})" if dropped else "") + f"; {FEATURES_NEEDED}")
    result = pd.DataFrame(out)
    featureless = result.isna().all(axis=1).to_numpy()
    if featureless.any():  # a class and nothing to tell it by: as a query, chance; as support, the mean
        rows = target.index[featureless]
        notes.append(f"dropped {int(featureless.sum())} rows without any feature value (every feature cell empty "
                     f"or missing: {_rows(rows)}, counted from 0 over the file's data rows)")
        result = result[~featureless].reset_index(drop=True)
        target = target[~featureless]
        if target.nunique() < 2:
            raise DataError(f"{where}: the rows with a feature value hold {target.nunique()} class(es) of target "
                            f"column '{source.target}'; classification needs at least two")
    if LABEL in result.columns:  # a feature called like the label column: rename it to a free name
        free = next(name for name in (f"{LABEL}_feature", *(f"{LABEL}_feature_{i}" for i in range(2, len(out) + 2)))
                    if name not in result.columns)
        result = result.rename(columns={LABEL: free})
        notes.append(f"feature column '{LABEL}' renamed to '{free}'")
        for record in records:
            if record["column"] == LABEL:
                record["renamed"] = free
    result[LABEL] = target.reset_index(drop=True).astype(object).astype("category")
    repeated, table_counts = _repeated_rows(result)
    if repeated:
        notes.append(repeated)
    classes = result[LABEL].cat.codes.to_numpy()
    giving = [r["column"] for r in records if (c := r.get("renamed", r["column"])) in result.columns
              and _gives_the_class(result[c], classes)]
    if giving:  # not a column's loss of information: a table-level warning
        table_counts["columns_giving_the_class"] = len(giving)
        many = len(giving) > 1
        notes.append(f"WARNING column{'s' if many else ''} {', '.join(repr(c) for c in giving)} "
                     f"give{'' if many else 's'} the class of every row (each of {'their' if many else 'its'} "
                     f"values occurs with one class only): if {'they are' if many else 'it is'} the target "
                     f"written again or derived from it, remove {'them' if many else 'it'} from the file, or the "
                     f"few-shot accuracy measures {'them' if many else 'it'}, not the method")
    if source.missing_indicators:
        result, records, added = _with_missing_indicators(result, records)
        if added:
            notes.append(f"missing_indicators: {len(added)} column(s) added, 1 where the numeric column beside it is "
                         f"missing ({', '.join(repr(a) for a in added[:_SHOWN])}{', ...' if len(added) > _SHOWN else ''})")
    for note in notes:
        log(f"[{stage} {name}] {note}")
    for record in records:
        for line in record["notices"]:
            log(f"[{stage} {name}] {line}")
        for line in record["warnings"]:
            log(f"[{stage} {name}] WARNING {line}")
    empty = int(featureless.sum())
    if empty:
        table_counts["rows_without_features"] = empty
    result.attrs[SCHEMA_ATTR] = json.dumps({"target": source.target, "rows_without_target": unlabeled, **table_counts,
                                            "columns": records})
    return result, {"source": "local", "file": source.path, "sha256": sha256_file(path),
                    "target": source.target, "dropped_rows": unlabeled + empty, "notes": notes, "columns": records}


def _with_missing_indicators(frame: pd.DataFrame, records: list[dict]) -> tuple[pd.DataFrame, list[dict], list[str]]:
    """``frame`` with a 0/1 column after each numeric feature column that has missing cells, named
    '<column> (missing)' (another free name if that one is taken), 1 where the cell is missing, and
    ``records`` with a record for each such column after its column's; the names added."""
    taken, columns, out_records, added = set(frame.columns), {}, [], {}
    for record in records:
        out_records.append(record)
        column = record.get("renamed", record["column"])
        if record["kind"] != "numeric" or column not in frame.columns or not frame[column].isna().any():
            continue
        indicator = next(n for n in (f"{column} (missing)", *(f"{column} (missing {i})"
                                                              for i in range(2, len(taken) + 2))) if n not in taken)
        taken.add(indicator)
        added[column] = indicator
        out_records.append({**_column_record(indicator, None, "missing indicator"), "kind": "numeric",
                            "missing": 0, "indicator_of": column})
    for column in frame.columns:
        columns[column] = frame[column]
        if column in added:
            columns[added[column]] = frame[column].isna().astype("float64")
    result = pd.DataFrame(columns, index=frame.index)
    result.attrs = dict(frame.attrs)
    return result, out_records, list(added.values())


# what a local column's record says of how it was read, carried into the schema report
REPORTED = ("read_as", "forced", "unit", "negatives", "time_as", "leading_zeros", "merged_integers", "bounds", "constant",
            "indicator_of", "merged_levels", *(field for field, *_ in _NOTATIONS.values()))
