def main():
    return "hello"
