"""Plain-Python units of work over the ports. Prefect tasks wrap them; tests call them directly."""
