"""Measurement: MACs (:mod:`.macs`), throughput (:mod:`.throughput`; the bench command, :mod:`.bench_command`),
accuracy and faithfulness (:mod:`.metrics`), interval estimation (:mod:`.intervals`), hypothesis tests
(:mod:`.significance`), rank statistics (:mod:`.rank_statistics`), trends (:mod:`.trend`), part and object coverage
(:mod:`.coverage`), the diversity of a token set (:mod:`.diversity`) and the arrays they take (:mod:`.arrays`),
evaluation of pruning configurations on the same images (:mod:`.evaluation`), MAC matching (:mod:`.mac_matching`),
the diversity of kept tokens (:mod:`.kept_tokens`), the reducers' wall-clock share (:mod:`.reducer_timing`)
and the ONNX export of a patched model, checked on ONNX Runtime (:mod:`.export`)."""
