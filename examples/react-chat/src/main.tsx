import { HarnessProvider } from "pi-durable-web/react";
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App.tsx";

const worker = () => new Worker(new URL("./worker.ts", import.meta.url), { type: "module" });

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <HarnessProvider worker={worker}>
      <App />
    </HarnessProvider>
  </StrictMode>,
);
