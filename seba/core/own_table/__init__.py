"""Your own table: a user's CSV / TSV / parquet / Excel / ARFF file (``sources.<name>.path``) read
into the raw table format (``seba.core.raw``), every column's type inferred by fixed rules that
are reported column by column (docs/own-table.md), so that nothing is lost without a word: the
file's format and encoding, its header, the notations its numbers, dates and times are written
in, missing-value marks, spreadsheet errors, codes, ids, repeated rows and the target's classes.
``load_local_table`` is the entry point; ``parse_numbers`` reads a column of numbers as written.

This module holds ``load_local_table``; the package's other modules each use only those before it:
``numbers`` (the marks, patterns and number parsing all share), ``files`` (the file read into text
cells), ``notations`` (what a column's cells are written as, the hints of what a text column
holds) and ``columns`` (each column's type and record, the columns dropped, the checks across
columns: missing-value marks, repeated rows, a feature that gives the class).
"""

from __future__ import annotations

import json
from pathlib import Path

from seba.core.config import csv_delimiter, local_format
from seba.core.errors import DataError
from seba.core.raw import FEATURES_NEEDED, LABEL, SCHEMA_ATTR, sha256_file
from seba.core.runtime import lazy_module, log
from seba.core.own_table.numbers import _SHOWN, _as_text, _plain_number_columns, _quote, _rows, parse_numbers
from seba.core.own_table.files import (SHEET_ERRORS, SHEET_UNCOMPUTED, _check_inside_repository, _delimiter_hint,
                                       _names_below, _not_found_hint, _read_local, _sheet_with, _text_encoding,
                                       _without_second_header)
from seba.core.own_table.notations import (_NOTATIONS, _composed, _errors_note, _formulas_note, _invisible_note,
                                           _spaces_note, _split_errors, _uncomputed_note)
from seba.core.own_table.columns import (UNFOLDED, _column_record, _finish_column, _gives_the_class,
                                         _infer_column, _merge_spellings, _merged_note, _missing_values_marked,
                                         _repeated_rows, _spelled, _spellings, _without_total_row)

pd = lazy_module("pandas")


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
    frame, total_note, total_row = _without_total_row(frame, source)
    if total_note:
        notes.append(total_note)
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
        # which rows: a total or a note below the table ('Total', the sums) has no class
        dropped = (f"dropped {unlabeled} row{'s' if unlabeled > 1 else ''} without a target "
                   f"(data {_rows(frame.index[target.isna()] + 1)})")
        frame, target = frame[target.notna()], target[target.notna()]
        marks, errors = _split_errors(marks)
        errors = {**errors, **sheet_errors.get(source.target, {})}
        marked = sum(marks.values())
        notes.append(f"WARNING {dropped}, {marked} of them for a missing-value mark ({_quote(marks)}), which may "
                     f"be a class ('None', 'NA' for North America): to keep such rows, write that class another "
                     f"way in the file"
                     if marked >= 3  # as many as a class needs: 'None' or 'NA' may be one
                     else dropped)
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
    records, out, unfolded = [], {}, {}
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
        if UNFOLDED in record:  # a column whose rare levels were folded: its levels before, to tell copies
            unfolded[column] = record.pop(UNFOLDED).reset_index(drop=True)
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
        unfolded = {c: v[~featureless].reset_index(drop=True) for c, v in unfolded.items()}
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
    repeated, table_counts = _repeated_rows(result, {r.get("renamed", r["column"]): unfolded[r["column"]]
                                                     for r in records if r["column"] in unfolded})
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
    if total_row:
        table_counts["total_row"] = total_row
    result.attrs[SCHEMA_ATTR] = json.dumps({"target": source.target, "rows_without_target": unlabeled, **table_counts,
                                            "columns": records})
    return result, {"source": "local", "file": source.path, "sha256": sha256_file(path), "target": source.target,
                    "dropped_rows": unlabeled + empty + bool(total_row), "notes": notes, "columns": records}


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
