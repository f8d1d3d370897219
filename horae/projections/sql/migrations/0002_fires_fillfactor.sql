-- Leave room in the pages of fires for HOT updates: attempts and outcomes update a fire row
-- shortly after its decision, touching no indexed column.
ALTER TABLE fires SET (fillfactor = 85);
