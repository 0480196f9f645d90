"""The one simulator shared by generation (Stage 2) and evaluation.

An assistant talks with a simulated user while a judge runs every submission in the sandbox.
Only the cast differs between generation and evaluation; the episode is written once
(`episode.session_episode`).
"""
