"""The report job's services: the Parquet audit (``audit``) and the HTML report page
(``page``)."""
