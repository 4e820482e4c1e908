"""Insights for admins (`/admin/insights/`): how Sourced is used and how well it answers over
a period, computed by SQL aggregations over the stored exchanges (`selectors`), drawn as
server-rendered SVG charts (`charts`), and exported one row per exchange as CSV (`export`).
Why it is built this way: docs/decisions/0120-insights-aggregated-in-sql.md."""
