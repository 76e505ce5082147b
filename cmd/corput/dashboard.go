package main

import "net/http"

// dashboardHandler serves the admin dashboard page; nil until it exists.
func dashboardHandler() http.Handler { return nil }
