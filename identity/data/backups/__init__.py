"""Backups kept elsewhere (the contract's "Backups on a schedule, kept elsewhere"): store (an S3 bucket or a
folder), archive (a backup's bytes: made, encrypted, opened), runs (take, list, verify, keep), restoring
(from the target) and schedule (one backup per scheduled time across every process and node)."""
