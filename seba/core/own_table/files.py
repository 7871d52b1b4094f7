"""A user's file read into a frame of text cells: CSV / TSV (compressed or not, in any encoding and
delimiter), parquet, Excel (sheets, merged cells, formulas) and ARFF, with the errors and hints for
a file that is not what its settings say (its encoding, its delimiter, names below a title, a
second header row)."""

from __future__ import annotations

import bz2
import codecs
import csv
import difflib
import gzip
import io
import json
import lzma
import os
import re
import warnings
import zipfile
from pathlib import Path

import numpy as np

from seba.core.config import DELIMITERS, INVISIBLE, column_name, local_format
from seba.core.errors import DataError
from seba.core.runtime import lazy_module, log
from seba.core.own_table.numbers import NUMERIC_SHARE, _SHOWN, _as_text, _numeric_cells, _rows, parse_numbers

pd = lazy_module("pandas")


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
