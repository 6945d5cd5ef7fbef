-- Issue 71. A repair has a kind (gpu-swap, gpu-reseat, nic-swap, cable, firmware, driver,
-- reboot, and data/repair_matrix.yml says which checks each voids) and the part it touched. A
-- repair recorded before, as free text, is of kind unknown: it voids every check.
ALTER TABLE repairs ADD COLUMN kind TEXT NOT NULL DEFAULT 'unknown';
ALTER TABLE repairs ADD COLUMN part TEXT NOT NULL DEFAULT '';
-- A validation's scope: full, or a recheck that ran only the stages its node's open holds
-- need (`validate --recheck`). The checks a recheck did not run keep their earlier passes,
-- and its acceptance holds only while no hold is left open.
ALTER TABLE node_results ADD COLUMN scope TEXT NOT NULL DEFAULT 'full'
