"""The embedded broker and its S3 store: acknowledged records kept across faults (`durability`),
and the store's CPU per request (`s3store`) and per partition listing (`s3listing`)."""
