-- A running job is leased by the control-plane replica running it: who, and until when (unix
-- milliseconds). The runner renews the lease while it works; a job whose lease ran out is
-- taken over by another replica, or by the same one after a restart.
ALTER TABLE jobs ADD COLUMN lease_owner TEXT;
ALTER TABLE jobs ADD COLUMN lease_expires_at BIGINT;
