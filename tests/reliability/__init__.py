"""Reliability and security campaign: fuzzing, the fault matrix, secret hygiene, hostile files and crash
consistency (docs/security.md describes what each proves)."""
