import ExampleApps
import Testing

/// The examples' command lines: every value checked when parsed, bad input an error, not a crash.
@Suite struct CommandLineTests {
    let options: [String: ExampleOption] = ["--seconds": .int(1...60), "--interval": .number(0.1...60), "--at": .point,
                                            "--name": .text]

    @Test func valuesFlagsAndWords() throws {
        let line = try ExampleCommandLine.parse(["hello", "--seconds", "7", "--no-peripheral", "--at", "1.5, -2", "world",
                                                 "--interval", "0.5", "--name", "--odd"],
                                                options: options, flags: ["--no-peripheral"])
        #expect(line.positional == ["hello", "world"])
        #expect(line.int("--seconds", default: 5) == 7)
        #expect(line.double("--interval", default: 5) == 0.5)
        #expect(line.point("--at", default: Point(x: 0, y: 0)) == Point(x: 1.5, y: -2))
        #expect(line.string("--name", default: "x") == "--odd")
        #expect(line.flag("--no-peripheral"))
        let defaults = try ExampleCommandLine.parse([], options: options)
        #expect(defaults.int("--seconds", default: 5) == 5)
        #expect(!defaults.flag("--no-peripheral"))
    }

    @Test(arguments: [
        (["--seconds"], "--seconds needs a value"),
        (["--seconds", "abc"], "--seconds must be a whole number from 1 to 60, not \"abc\""),
        (["--seconds", "0"], "--seconds must be a whole number from 1 to 60, not \"0\""),
        (["--seconds", "99999999999999999999999"], "--seconds must be a whole number from 1 to 60, not \"99999999999999999999999\""),
        (["--interval", "nan"], "--interval must be a number from 0.1 to 60.0, not \"nan\""),
        (["--interval", "inf"], "--interval must be a number from 0.1 to 60.0, not \"inf\""),
        (["--at", "1"], "--at must be X,Y in metres, not \"1\""),
        (["--at", "1,2,3"], "--at must be X,Y in metres, not \"1,2,3\""),
        (["--at", "1e300,0"], "--at must be X,Y in metres, not \"1e300,0\""),
        (["--bogus"], "unknown option --bogus"),
    ])
    func badInputIsAnError(arguments: [String], message: String) {
        #expect(throws: ExampleUsageError(description: message)) {
            try ExampleCommandLine.parse(arguments, options: options, flags: ["--no-peripheral"])
        }
    }
}
