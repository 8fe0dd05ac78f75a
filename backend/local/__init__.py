"""Private implementation of the embedded local backend; import from :mod:`backend` instead."""
