"""The daemon's shell: process-level plumbing around the pure core (systemd notification, logging)."""
