"""``render: true``: the page's scripts run in headless Chromium, in the machine's one render process
(docs/rendering.md).

``renderer`` is the fetching process's side; ``server_process`` starts, reaches and stops the render
process; ``server`` and ``tab`` run inside it and import nothing of sift but each other.
"""
