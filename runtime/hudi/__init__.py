"""Hudi's table format and the checkpoint-message files, named as Hudi names them. Imports runtime.data and below."""
