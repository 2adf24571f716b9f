"""`logbus console`: a read-only web console of one cluster, served by twisted.web from Jinja2 templates.

The parts, one job each: ``reader`` (the Kafka requests, batched: blocking, run off the reactor),
``collector`` (one sample of the cluster per interval into ``lag_history``), ``lag_status`` (the
Burrow-like OK/WARN/STALL/STOP rules as pure functions), ``views`` (what each page shows, from a
sample), ``charts`` (the inline SVG pictures' geometry), ``lag_metrics`` (lag on ``/metrics``)
and ``web`` (the resources and the templates). The command itself is ``broker/tools/console.py``.
"""
