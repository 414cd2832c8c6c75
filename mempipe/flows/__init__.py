"""One Prefect flow per job. Flows only sequence tasks: no SQL, HTTP or business rules here."""
