package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"
)

// Output formats of `loomctl trace`.
const (
	outputDefault = ""
	outputWide    = "wide"
	outputJSON    = "json"
)

// maxStatus bounds a cause in the default output; wide shows it whole.
const maxStatus = 200

// printTrace writes the trace rooted at n in format.
func printTrace(w io.Writer, n *traceNode, format string) error {
	if format == outputJSON {
		b, err := json.MarshalIndent(n, "", "  ")
		if err != nil {
			return fmt.Errorf("cannot encode trace: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	wide := format == outputWide
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "NAME\tRESOURCE\tSYNCED\tREADY\tSTATUS")
	} else {
		fmt.Fprintln(tw, "NAME\tSYNCED\tREADY\tSTATUS")
	}
	p := printer{w: tw, wide: wide, rootNS: n.Namespace}
	p.node(n, "", "", true)
	return tw.Flush()
}

type printer struct {
	w      io.Writer
	wide   bool
	rootNS string
}

// node prints n after the tree prefix of its line (lead+branch) and its
// children with lead extended.
func (p printer) node(n *traceNode, lead, branch string, last bool) {
	causes := n.Causes
	first := "-"
	switch {
	case len(causes) > 0:
		first = p.status(causes[0])
		causes = causes[1:]
	case n.Ready == "True":
		first = "Available"
	}
	p.row(lead+branch+p.name(n), n.ResourceName, column(n.Synced), column(n.Ready), first)

	// Lines below this one: the rest of n's causes, then its children.
	next := lead
	if branch != "" {
		if last {
			next += "   "
		} else {
			next += "│  "
		}
	}
	bar := "   "
	if len(n.Children) > 0 {
		bar = "│  "
	}
	for _, c := range causes {
		p.row(next+bar, "", "", "", p.status(c))
	}
	for i, c := range n.Children {
		lastChild := i == len(n.Children)-1
		b := "├─ "
		if lastChild {
			b = "└─ "
		}
		p.node(c, next, b, lastChild)
	}
}

func (p printer) row(name, resource, synced, ready, status string) {
	if p.wide {
		fmt.Fprintf(p.w, "%s\t%s\t%s\t%s\t%s\n", name, resource, synced, ready, status)
		return
	}
	fmt.Fprintf(p.w, "%s\t%s\t%s\t%s\n", name, synced, ready, status)
}

func (p printer) name(n *traceNode) string {
	if n.Name == "" {
		// A template the renderer could not render has neither kind nor
		// name yet.
		return "(" + n.ResourceName + ")"
	}
	s := n.Kind + "/" + n.Name
	if n.Namespace != "" && (n.Role == roleClaim || n.Namespace != p.rootNS) {
		s += " (" + n.Namespace + ")"
	}
	return s
}

// status renders a cause on one line, cut to maxStatus unless wide.
func (p printer) status(c traceCause) string {
	s := strings.Join(strings.Fields(c.String()), " ")
	if !p.wide && utf8.RuneCountInString(s) > maxStatus {
		r := []rune(s)
		s = string(r[:maxStatus-1]) + "…"
	}
	return s
}

func column(status string) string {
	if status == "" {
		return "-"
	}
	return status
}
