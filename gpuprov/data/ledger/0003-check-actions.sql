-- what an operator should do about a failing check (model.Action), older rows none
ALTER TABLE check_results ADD COLUMN action TEXT NOT NULL DEFAULT 'none'
    CHECK (action IN ('none', 'restart-workload', 'reset-gpu', 'reboot',
                      'reseat-or-inspect', 'rma'))
