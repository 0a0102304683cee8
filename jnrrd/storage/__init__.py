"""Where bytes live: local files, atomic replacement, leftovers of interrupted writes."""
