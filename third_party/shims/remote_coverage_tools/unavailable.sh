#!/bin/sh
echo "coverage tools are not available in Strata's offline build" >&2
exit 1
