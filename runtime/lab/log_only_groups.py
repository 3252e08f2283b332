"""Merge-on-read file groups the official reader does not list through the metadata table.

hudi-rs 0.5 (``hudi`` on PyPI) lists a table of version 8 or later through its metadata table when
``hoodie.table.metadata.partitions`` names ``files`` (``Table.is_metadata_table_enabled``), and
builds the file groups of that listing around base files only
(``file_system_view::file_groups_from_files_partition_records``: "Currently only supports file
groups with base files. TODO: Support file groups with only log files"). Hudi's Flink writer gives
every new bucket of a merge-on-read table log files only until its first compaction
(``FlinkAppendHandle``), and Hudi's own readers (``HoodieTableFileSystemView``) read such a file
group; hudi-rs's storage listing does too, but not its metadata-table listing, so those rows would
look lost. The lab reads them with the official reader's own file group reader
(``read_file_slice_from_paths`` with no base file), from the metadata table's listing: the rows
are what Hudi's readers return, and the listing stays the metadata table's.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from runtime.core.dfs import open_dfs
from runtime.hudi.formats.log_format import LogFileName
from runtime.hudi.table.base_files import parse_base_file_name
from runtime.hudi.table.hudi_table import HudiTable
from runtime.hudi.table.metadata_table import open_metadata_table, read_files_partition


def log_only_slices(table_uri: str, as_of: str | None = None) -> list[list[str]]:
    """The log files (table-relative, in instant order) of each file group that the metadata table
    lists with no base file; [] for a table hudi-rs lists without its metadata table."""
    dfs, base = open_dfs(table_uri, role="reader")
    table = HudiTable.open(dfs, base)
    if not table.props.merge_on_read or not table.version.layout_2:
        return []
    mdt = open_metadata_table(table)
    if mdt is None:
        return []
    out = []
    for partition, names in sorted(read_files_partition(mdt).partitions.items()):
        bases = {p[0] for n in names if (p := parse_base_file_name(n)) is not None}
        logs: dict[str, list[LogFileName]] = {}
        for n in names:
            log = LogFileName.parse(n)
            if log is not None and log.file_id not in bases and (as_of is None or log.base_instant <= as_of):
                logs.setdefault(log.file_id, []).append(log)
        for group in logs.values():
            ordered = sorted(group, key=lambda g: (g.base_instant, g.version))
            out.append([f"{partition}/{g}" if partition else str(g) for g in ordered])
    return out


def read_log_only_groups(reader_table: Any, table_uri: str, as_of: str | None = None) -> list[pa.RecordBatch]:
    """The rows of :func:`log_only_slices`, read by the official reader's file group reader."""
    from hudi import HudiReadOptions

    slices = log_only_slices(table_uri, as_of)
    if not slices:
        return []
    options = HudiReadOptions().with_as_of_timestamp(as_of) if as_of else HudiReadOptions()
    reader = reader_table.create_file_group_reader_with_options(options)
    return [reader.read_file_slice_from_paths("", logs) for logs in slices]
