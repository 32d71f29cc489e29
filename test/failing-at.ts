import type { SqliteDatabase, SqliteTransaction } from "../src/storage/sqlite/database.ts";

/** A SqliteDatabase whose transactions fail at their `at`-th written statement once armed (a crash inside one). */
export function failingAt(db: SqliteDatabase) {
  let at = 0;
  let count = 0;
  const wrap = (tx: SqliteTransaction): SqliteTransaction => ({
    run: (sql, ...params) => {
      if (at > 0 && ++count === at) throw new Error(`crashed at statement ${at}`);
      return tx.run(sql, ...params);
    },
    get: (sql, ...params) => tx.get(sql, ...params),
    all: (sql, ...params) => tx.all(sql, ...params),
  });
  const database: SqliteDatabase = new Proxy(db, {
    get(target, key) {
      if (key === "transaction") return <T>(body: (tx: SqliteTransaction) => T) => target.transaction((tx) => body(wrap(tx)));
      const value = Reflect.get(target, key) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return {
    database,
    arm(statement: number) {
      at = statement;
      count = 0;
    },
  };
}
