"""Request records, metrics under TensorFlow Serving's names, the Prometheus endpoint and the
access log.

    transport (REST / gRPC) ─▶ RequestRecord ─▶ RequestObservers ─▶ request metrics, access log
    loader, warmup, batcher ─▶ the process-wide ``catalog.METRICS``
    scrape ─▶ ``endpoint.scrape`` ─▶ TensorFlow Serving's text format, then ours
"""
