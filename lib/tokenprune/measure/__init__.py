"""Measurement: MACs (:mod:`.macs`), throughput (:mod:`.throughput`), metrics and statistics
(:mod:`.metrics`, :mod:`.rank_statistics`, :mod:`.trend`), evaluation of pruning configurations on the
same images (:mod:`.evaluation`), MAC matching (:mod:`.mac_matching`), the diversity of kept tokens
(:mod:`.kept_tokens`) and the reducers' wall-clock share (:mod:`.reducer_timing`)."""
