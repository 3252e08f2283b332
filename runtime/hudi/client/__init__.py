"""Hudi's write client and its table services (``hudi-client-common``): start, commit, roll back
failed writes and the post-commit services; rollback, clean, archive, compaction, the metadata
table's writer and the table lock, as actions that use the table."""
