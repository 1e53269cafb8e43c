package main

// notes explains the table; kept with the code that measures it.
const notes = `
## How each figure is measured

* **P1** times ` + "`exec`" + ` of ` + "`true`" + ` from the go-sdk MCP client over Streamable
  HTTP, through the gateway (authentication from its informer cache), the agent
  API (HTTP/2 on loopback) and the sandbox's init, which hands the command to an
  idle shepherd that forks ` + "`/bin/sh`" + `; the baseline is ` + "`/bin/sh -c true`" + ` forked
  by this process, and ` + "`runc exec`" + ` into the same container for reference.
* **P2** runs a job writing to stdout and polls it to its end with 4 MiB pages.
  The producer is never blocked by the reader (by design): what the client does
  not read in time is dropped from the 4 MiB ring and reported, so the table
  gives both the rate the job produced at and the rate delivered to the client.
* **P3** creates the tenants at once and polls until each reports Ready: a
  token minted, a sandbox bound, provisioned and running.
* **P6** sums the PSS of every process of the idle sandboxes (init and its
  idle shepherds) from ` + "`/proc/<pid>/smaps_rollup`" + `.
* **P7** is the heap growth of this process, which runs the agent (and the
  manager and gateway), while 32 jobs write and nobody reads.
* **P5** needs the manager and the agent in processes of their own to measure
  their memory apart; it is not measured yet.
`
