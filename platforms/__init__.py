"""Platform facts: the profiles (YAML under profiles/, their schema and catalog), a box's hooks, its run layout,
its billable resource kinds and host rules. Pure: no Django, no database; the fleet reads them."""
