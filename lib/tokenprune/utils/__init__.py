"""What every layer shares: atomic files and JSON (:mod:`.io`), provenance and the data folder (:mod:`.environment`)."""
