"""Platform profiles and instances arrive with issue 3."""
