"""One column's type by the rules of docs/own-table.md: numeric or categorical and the notation
it is read in, the columns dropped (all missing, row ids, a different text or code in every row),
spellings merged, its numbers checked against the source's settings; and the checks across
columns (missing-value marks, repeated rows, a feature that gives the class)."""

from __future__ import annotations

import re

import numpy as np

from seba.core.errors import DataError
from seba.core.raw import FLOAT32_MAX, LABEL
from seba.core.runtime import lazy_module
from seba.core.own_table.numbers import (NUMERIC_SHARE, _CONVENTIONS, _INDEX_NAME, _OTHER_DIGIT, _SHOWN, _as_text,
                                         _ascii, _grouped_like, _numeric_cells, _quote, _rows, _separator, _unformula,
                                         parse_numbers)
from seba.core.own_table.notations import (_Cells, _FEW_UNITS, _NOTATIONS, _TRUTH, _clock_times, _composed, _distinct,
                                           _formulas_note, _invisible_note, _iso_dates, _magnitude_values,
                                           _merged_integers, _misread_dates, _month_name_dates, _months_or_quarters,
                                           _note_marks, _note_time, _ordered_dates, _other_notations,
                                           _parenthesised_negatives, _several_units, _spaces_note, _text_hint,
                                           _time_as_numbers, _unit_durations, _utf8, _without_text_mark,
                                           _without_unit, _without_word, _written_durations, _zero_padded)

pd = lazy_module("pandas")


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
                written = distinct if distinct is not None else _Cells.of(text)
                # a different cell in every row, none missing: each level would be one row
                unique = len(text) > source.max_categories and len(written.distinct) == len(text) and (
                    written.codes >= 0).all()
                code = _code_written(text) if unique else None
                if code:  # 'P-00017', 'ID0451': not a unit before numbers, which the hint would say
                    return _dropped_unique(record, column, text, key, "code", f"{code}, as ids are written",
                                           f"'{key}.numeric' to read its numbers (if they count or measure "
                                           f"something) or in "), None
                hint = _text_hint(column, written, key, source.date_order)
                several = None if hint else _several_units(column, text.dropna(), source)
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
    number, before, after = parts["number"], parts["before"].iloc[0], parts["after"].iloc[0]
    widths = number.str.len()
    if widths.nunique() != 1 or not number.str.startswith("0").any() or not (before or after):
        return None
    around = " and ".join(f"'{w}' {where}" for w, where in ((before, "before"), (after, "after")) if w)
    return f"{around} numbers of {widths.iloc[0]} digits, some with leading zeros"


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
    if index_like and "time_as" in record and index_like[0] != "beside the table":
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
        record[UNFOLDED] = pd.Series(values).astype("category")  # for the repeated rows (taken off the record)
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


_BESIDE_SHARE = 0.1  # the most rows a header-less column holds values in that are taken for notes beside the table


def _index_like(column: str, values: pd.Series, kind: str, complete: bool) -> tuple[str, str, bool] | None:
    """Why a column is a row index rather than a feature (short, long, and whether to warn: the
    column may be a feature), or None: a header-less column with a distinct value in every row (an
    index written with the table; ``_finish_column`` keeps one of numbers with fractions), or a
    column of integers that increase strictly from row to row
    (a row id; with gaps between them, also what a feature looks like when the table is sorted by
    it, hence a warning), or a header-less column with values in at most ``_BESIDE_SHARE`` of its
    rows (notes or a calculation beside the table). ``complete``: no cell of ``values`` is missing."""
    if _INDEX_NAME.fullmatch(column):
        if complete and values.nunique() == len(values):
            return ("row index", "a row index written into the file (no header name, a distinct value in every "
                                 "row)", False)
        held = values.dropna()
        if len(held) <= _BESIDE_SHARE * len(values):
            shown = ", ".join(f"'{v:g}'" if isinstance(v, float) else f"'{v}'" for v in held.iloc[:2])
            return ("beside the table", f"it has no header name and values in only {len(held)} of its "
                                        f"{len(values)} rows (e.g. {shown}), as notes or a calculation beside a "
                                        f"table have", False)
    if kind == "numeric" and complete and len(values) >= 3:
        v = values.to_numpy()
        steps = np.diff(v)
        if (v == np.round(v)).all() and (steps > 0).all():
            if (steps == 1).all():
                return "row id", f"a row id (integers increasing by 1 from row to row, {v[0]:.0f} to {v[-1]:.0f})", False
            return ("row id", f"a row id (integers increasing strictly from row to row, with gaps, {v[0]:.0f} to "
                              f"{v[-1]:.0f}), or a feature the table is sorted by", True)
    return None


# the word a spreadsheet's total row is labelled with ('Total', 'Grand total', 'Sum', 'Gesamt', ...)
_TOTAL_WORD = r"(?:grand |sub-?)?totals?:?|sum:?|summe|gesamt(?:summe)?|totale?|suma|somme"
_TOTAL_ROWS_SEEN = 3  # the last rows looked at: a total may have a note or two below it


def _without_total_row(frame: pd.DataFrame, source) -> tuple[pd.DataFrame, str | None, int | None]:
    """``frame`` without a spreadsheet's total row, the notice that names it and its data row: one of the last
    rows with a cell that reads 'Total' (or 'Sum', ...) whose numbers are the sums of the rows above
    it in at least half the columns where it holds one (within what rounding the cells as written
    leaves), as a report exported from a sheet has below its table. Such a row is no row of data: a
    feature's value 100 times its others, and its class, if any, a sum of classes."""
    if len(frame) < 3:
        return frame, None, None
    for position in range(len(frame) - 1, max(len(frame) - 1 - _TOTAL_ROWS_SEEN, 0), -1):
        row = frame.iloc[position]
        cells = pd.Series([str(v).strip() for v in row.to_numpy()], index=frame.columns, dtype="string")
        worded = cells.str.fullmatch(_TOTAL_WORD, case=False).fillna(False).astype(bool)
        if not worded.any():
            continue
        totals = parse_numbers(cells[~worded], source.thousands, source.decimal)
        totals = totals[np.isfinite(totals)]  # the columns where the row holds a number
        summed = []
        above = frame.iloc[:position]
        for column, total in totals.items():
            written = above[column].astype("string").str.strip()
            values = parse_numbers(written, source.thousands, source.decimal)
            numbers = int(values.notna().sum())
            if numbers < 2 or numbers < 0.9 * written.notna().sum():
                continue
            places = [len(c.rsplit(source.decimal, 1)[1]) if source.decimal in c else 0
                      for c in (cells[column], *written.dropna().iloc[:1000])]
            slack = 0.5 * 10.0 ** -places[0] + 0.5 * 10.0 ** -max(places[1:]) * numbers
            if abs(float(values.sum()) - total) <= slack + 1e-9 * abs(total):
                summed.append(str(column))
        if summed and 2 * len(summed) >= len(totals):
            shown = ", ".join(f"'{c}'" for c in summed[:_SHOWN]) + (", ..." if len(summed) > _SHOWN else "")
            named = worded.idxmax()  # the first column that reads 'Total'
            return (frame.drop(index=frame.index[position]),
                    f"data row {position + 1} dropped: it reads '{cells[named]}' (column '{named}') and its "
                    f"numbers are the sums of the rows above it ({shown}), as a sheet's total row is, not a row "
                    f"of data", position + 1)
        break  # the last row that reads 'Total' is not a total: no other is looked for
    return frame, None, None


UNFOLDED = "_unfolded"  # a record's key, while it is built: a folded column's levels before the fold


def _copies(table: pd.DataFrame) -> tuple[int, int]:
    """(rows that repeat an earlier row, features and class; rows whose features a row of another
    class has), comparing rows by their 64-bit hashes (pandas' ``hash_pandas_object``: 42 ms for
    10,000 x 785)."""
    hashed = pd.util.hash_pandas_object(table.drop(columns=LABEL), index=False).to_numpy()
    again = pd.Series(hashed).duplicated(keep=False).to_numpy()
    if not again.any():
        return 0, 0
    same, label = pd.Series(hashed[again]), pd.Series(table[LABEL].cat.codes.to_numpy()[again])
    copies = int(pd.DataFrame({"row": same, "label": label}).duplicated().sum())
    return copies, int((label.groupby(same).transform("nunique") > 1).sum())


def _repeated_rows(table: pd.DataFrame, unfolded: dict[str, pd.Series]) -> tuple[str | None, dict[str, int]]:
    """The notice for rows of a local table (its features and ``LABEL``) that repeat another row
    exactly, and for rows whose features another row of another class has (None when there are
    none), and the counts (``repeated_rows``, ``rows_sharing_features``, ``repeated_once_folded``)
    where not 0. The split does not keep copies together (the benchmark tables have them too: dna
    184, cmc 48), so a row and its copy can be support and query of one episode. ``unfolded``: the
    levels of the columns whose rare levels were folded, before the fold (by their names in ``table``
    and aligned with its rows):
    rows that are the same only once folded are no copies in the file, and are counted apart."""
    if table.drop(columns=LABEL).empty:
        return None, {}
    copies, clashing = _copies(table)
    written = copies
    if copies and unfolded:
        written = _copies(table.assign(**{c: v.to_numpy() for c, v in unfolded.items()}))[0]
    if not copies and not clashing:
        return None, {}
    parts = ([f"{written} row(s) repeat an earlier row exactly (features and class): the split keeps no copies "
              f"together, so a row and its copy can be support and query of one episode (the benchmark tables "
              f"have such rows too)"] if written else []) + \
        ([f"{copies - written} row(s) repeat an earlier row (features and class) once the rare levels of "
          f"{', '.join(repr(c) for c in unfolded)} are folded (not in the file)"] if copies > written else []) + \
        ([f"{clashing} row(s) share their features with a row of another class"] if clashing else [])
    counts = {k: v for k, v in (("repeated_rows", written), ("repeated_once_folded", copies - written),
                                ("rows_sharing_features", clashing)) if v}
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
