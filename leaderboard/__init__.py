"""Leaderboard CSVs, tables and plots from harness result files (not yet implemented)."""
