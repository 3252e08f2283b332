"""``python -m runtime.lab.timeline_plot TRACE.json OUT.png [--result result.json]``."""

from runtime.lab.timeline_plot.render import main

raise SystemExit(main())
