"""The console: the tenant's schedules, their history and lateness in a browser, served by
``horae api`` under ``/console`` (same origin, same tokens and roles as the API).

Server-rendered Jinja2 templates with htmx (vendored in ``static/``, no CDN, no build step);
every act goes through the API's own routes (:mod:`horae.console.routes`). See docs/console.md.
"""
