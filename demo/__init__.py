"""End-to-end demo and set-up helpers on the local bed (also used by the e2e tests)."""
