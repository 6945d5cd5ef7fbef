-- which controller runs it (PostgreSQL: its host name, and the database session that
-- holds the run's hosts), and each check's place in the evaluation order
-- (no semicolon in these comments: statements are split on it)
ALTER TABLE runs ADD COLUMN controller TEXT;
ALTER TABLE runs ADD COLUMN session INTEGER;
ALTER TABLE check_results ADD COLUMN seq INTEGER
