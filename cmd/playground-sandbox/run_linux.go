package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/playground-dev/playground/hostagent/guest"
)

func run(mode string, args []string) int {
	switch mode {
	case "init":
		fs := flag.NewFlagSet("init", flag.ExitOnError)
		spares := fs.Int("spares", 1, "idle shepherds kept ready for the next command")
		_ = fs.Parse(args)
		if err := guest.RunInit(guest.InitOptions{Spares: *spares, Log: os.Stderr}); err != nil {
			fmt.Fprintf(os.Stderr, "playground-sandbox init: %v\n", err)
			return 1
		}
		return 0
	case "shepherd":
		return guest.RunShepherd()
	}
	usage()
	return 2
}
