"""Layer 5: the measured worklog (``gemmlab report``) and the README's generated tables. Uses the
layers below."""
