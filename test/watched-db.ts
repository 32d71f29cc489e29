/**
 * A SQLite database whose transactions are watched: each statement a transaction body runs (`run`, with the rows it
 * changed) or reads one row with (`get`) is told before its result goes back; everything else passes through. Tests
 * count what a storage writes or reads per commit with it (decisions 0056 and 0081).
 */
import type { SqliteDatabase, SqliteTransaction } from "../src/storage/sqlite/database.ts";

export interface TransactionWatch {
  run?(sql: string, changed: number): void;
  get?(sql: string): void;
}

export function watchTransactions(db: SqliteDatabase, watch: TransactionWatch): SqliteDatabase {
  return new Proxy(db, {
    get(target, key) {
      if (key === "transaction")
        return <T>(body: (tx: SqliteTransaction) => T) =>
          target.transaction((tx) =>
            body({
              run: (sql, ...params) => {
                const changed = tx.run(sql, ...params);
                watch.run?.(sql, changed);
                return changed;
              },
              get: (sql, ...params) => {
                watch.get?.(sql);
                return tx.get(sql, ...params);
              },
              all: (sql, ...params) => tx.all(sql, ...params),
              ...(tx.writes ? { writes: () => tx.writes!() } : {}),
            }),
          );
      const value = Reflect.get(target, key) as unknown;
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
