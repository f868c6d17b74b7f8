-- An instance's jobs are listed (`GET /v1/instances/{id}/jobs`); jobs outlive their instance,
-- so the table only grows.
CREATE INDEX jobs_by_instance ON jobs(instance_id);
