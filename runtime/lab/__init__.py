"""Verdicts and experiments over what a job produced: verify, deadlock detector, results, reports,
compare, fault matrix, plots, the S3 endpoint. Imports runtime.protocols and below.
"""
