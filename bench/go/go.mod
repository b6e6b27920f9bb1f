module claimstore.dev/bench

go 1.26

require claimstore.dev/claimstore v0.0.0

replace claimstore.dev/claimstore => ../../store/go
